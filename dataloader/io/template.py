"""``Template``: a location pattern parsed once, written per item for its target.

A template is a ``str.format`` pattern whose fields are ``{index}`` (the item's
dataset index, an int) and named values given as keywords: constants, or
callables ``index -> value`` evaluated when the item is fetched.  The dataset
that uses it binds it to its target (``bind``):

- ``"url"`` (``HttpDataset``): every value is percent-encoded (``quote(value,
  safe="")``), so a value cannot add a ``/``, ``?`` or ``#``.  Fields may appear
  only after ``scheme://host/``: a value never chooses the host.
- ``"key"`` (``ObjectStoreDataset``) and ``"path"`` (``FileDataset``): values are
  written as they are; a value containing ``/`` (in a path also ``\\`` or NUL),
  or equal to ``.`` or ``..``, is refused.  In an ``s3://bucket/...`` template
  fields may appear only after the bucket.

Constants are checked when the dataset is built (``ValueError``); callable
values when the item is made, failing that item.  A composed location whose
path has a ``.`` or ``..`` component (in a URL also spelled ``%2e``) fails that
item with ``ValueError``: nothing a value contains leaves the root, bucket or
host the template names.
"""

from __future__ import annotations

import string
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from dataloader.io._redact import MASK, redact, redact_url

__all__ = ["Template", "check_components", "check_value", "plain_url"]

TARGETS = ("url", "key", "path")
_FORBIDDEN = {"url": "", "key": "/", "path": "/\\\x00"}


def plain_url(location: str) -> bool:
    """True when ``location`` is printable ASCII without a space or bracket, and no ``.`` or
    ``%`` starts it or follows a ``/`` or ``:`` (where urlsplit starts a path component):
    ``urlsplit`` then takes it as it is (nothing stripped, removed, NFKC-checked, no IPv6
    host), never raises, and none of its path components is ``.`` or ``..`` (spelled
    ``%2e`` or not).  False says nothing (look with ``urlsplit``).  A fast path: a few
    substring searches in C, a tenth of ``urlsplit``'s cost.
    """
    return (
        location.isascii() and location.isprintable() and location[:1] not in ".%"
        and " " not in location and "[" not in location and "]" not in location
        and "/." not in location and "/%" not in location and ":." not in location and ":%" not in location
    )


def check_value(name: str, value: str, target: str) -> None:
    """Raise ``ValueError`` when ``value`` (of field ``name``) is not allowed in ``target``."""
    if target == "url":
        return  # percent-encoded: nothing it contains is special
    for ch in _FORBIDDEN[target]:
        if ch in value:
            raise ValueError(f"template value {name}={value!r} contains {ch!r}, which a {target} value may not")
    if value in (".", ".."):
        raise ValueError(f"template value {name}={value!r} is a relative path component, which a {target} may not hold")


def check_components(location: str, target: str) -> None:
    """Raise ``ValueError`` when ``location``'s path has a ``.`` or ``..`` component.

    For a URL only the path counts, and each component is percent-decoded first
    (``%2e%2e`` is ``..``).
    """
    path = location
    if target == "url":
        if plain_url(location):  # no component can be "." or ".." (and urlsplit would not raise)
            return
        try:
            path = urlsplit(location).path
        except ValueError as exc:  # "Invalid IPv6 URL"
            raise ValueError(f"location {redact_url(location)!r} is not a valid URL ({exc})") from None
    for part in path.replace("\\", "/").split("/") if target == "path" else path.split("/"):
        if (unquote(part) if target == "url" else part) in (".", ".."):
            raise ValueError(
                f"location {(redact_url if target == 'url' else redact)(location)!r} has a {part!r} component "
                "(relative components are refused)"
            )


class Template:
    """A location pattern such as ``"https://host/{split}/{index:08d}.jpg"``.

    Args:
        pattern: a ``str.format`` pattern.  Fields: ``index`` (the item's dataset
            index, an int) and the names given in ``values``; format specs and
            ``!s``/``!r`` conversions are allowed, positional (``{}``, ``{0}``),
            attribute and item fields (``{a.b}``, ``{a[0]}``) are not.
        **values: field values: constants (str, int, float) or callables
            ``index -> value`` evaluated when the item is made.

    Thread-safety: immutable after construction; ``format`` may run on any thread.

    Raises:
        ValueError: the pattern does not parse, a field is unknown or positional,
            or a value is given that the pattern does not use.
        TypeError: a value is neither a str, an int, a float nor a callable.
    """

    __slots__ = ("pattern", "values", "_parts", "_prefix")

    def __init__(self, pattern: str, **values: Any) -> None:
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
        if "index" in values:
            raise ValueError("'index' is the item's index; it cannot be given as a value")
        try:
            parsed = list(string.Formatter().parse(pattern))
        except ValueError as exc:
            raise ValueError(f"template {redact(pattern)!r} does not parse: {exc}") from None
        used = set()
        for _, field, spec, conversion in parsed:
            if field is None:
                continue
            if not field.isidentifier():
                raise ValueError(
                    f"template {redact(pattern)!r}: field {{{field}}} must be a name ('index' or a keyword value), "
                    "not positional, an attribute or an item"
                )
            if field != "index" and field not in values:
                raise ValueError(f"template {redact(pattern)!r} uses {{{field}}}, which has no value")
            if conversion not in (None, "s", "r"):
                raise ValueError(f"template {redact(pattern)!r}: conversion !{conversion} is not supported")
            if spec and "{" in spec:
                raise ValueError(f"template {redact(pattern)!r}: nested fields in format specs are not supported")
            used.add(field)
        for name, value in values.items():
            if name not in used:
                raise ValueError(f"template {redact(pattern)!r} does not use the value {name}=")
            if not (callable(value) or isinstance(value, (str, int, float))) or isinstance(value, bool):
                raise TypeError(f"template value {name}= must be a str, int, float or callable, got {type(value).__name__}")
        self.pattern = pattern
        self.values = dict(values)
        self._parts = tuple(parsed)
        first = next((i for i, p in enumerate(parsed) if p[1] is not None), len(parsed))
        self._prefix = "".join(p[0] for p in parsed[: first + 1]) if first < len(parsed) else pattern

    def __repr__(self) -> str:
        """The pattern and values, a URL pattern's credentials and secret parameters masked
        (with the values of the fields written there: see ``dataloader.io._redact``)."""
        shown = redact(self.pattern)
        hidden = set(self.values)
        if shown != self.pattern:
            try:
                hidden -= {field for _, field, _, _ in string.Formatter().parse(shown) if field}
            except ValueError:  # masking cut a field in two: show no value
                pass
        else:
            hidden.clear()
        extra = "".join(f", {k}={MASK if k in hidden else repr(v)}" for k, v in self.values.items())
        return f"Template({shown!r}{extra})"

    def bind(self, target: str) -> Template:
        """Check the template for ``target`` (``"url"``, ``"key"`` or ``"path"``); return it.

        Raises:
            ValueError: a constant value is not allowed in ``target``, or a field
                sits in a URL's scheme or host or an object store URL's bucket.
        """
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        if "://" in self.pattern or target == "url":
            scheme, sep, rest = self._prefix.partition("://")
            if not sep or "/" not in rest:
                what = "host" if target == "url" else "bucket"
                raise ValueError(
                    f"template {redact(self.pattern)!r}: fields may only follow 'scheme://{what}/' "
                    f"(a value never chooses the {what})"
                )
        for _, field, spec, conversion in self._parts:
            if field is not None and field != "index" and not callable(self.values[field]):
                check_value(field, _text(self.values[field], spec, conversion), target)
        return self

    def format(self, index: int, target: str) -> str:
        """The location of item ``index`` for ``target``.

        Raises:
            ValueError: a callable value is not allowed in ``target``, or the location
                has a ``.`` or ``..`` component.
        """
        out = []
        for literal, field, spec, conversion in self._parts:
            out.append(literal)
            if field is None:
                continue
            value: Any = index if field == "index" else self.values[field]
            per_item = field != "index" and callable(value)
            text = _text(value(index) if per_item else value, spec, conversion)
            if per_item:
                check_value(field, text, target)
            if target == "url" and not (text.isascii() and text.isalnum()):  # letters, digits: as they are
                text = quote(text, safe="")
            out.append(text)
        location = "".join(out)
        check_components(location, target)
        return location


def _text(value: Any, spec: str | None, conversion: str | None) -> str:
    if conversion == "r":
        value = repr(value)
    elif conversion == "s":
        value = str(value)
    return format(value, spec or "")
