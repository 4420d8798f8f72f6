"""The per-item URL checks' fast paths decide exactly as ``urlsplit`` does.

``HttpDataset`` checks every item's URL (no ``.``/``..`` path component, an http(s) URL with a
host); ``template.plain_url`` lets a URL that ``urlsplit`` would take as it is skip
``urlsplit`` (a tenth of its cost), and a template value of letters and digits skips
``quote``.  Each is compared here with the reading it replaces, on generated strings made of
the characters that matter (separators, dots, ``%2e``, brackets, white space, non-ASCII).
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

import pytest

from dataloader.io import Locations, Template
from dataloader.io.http import _check_url
from dataloader.io.template import check_components, plain_url

hypothesis = pytest.importorskip("hypothesis")  # the test extra installs it
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PIECES = ["/", ".", "..", "%2e", "%2E", "%", ":", "?", "#", "[", "]", "@", " ", "\t", "\n", "\x00", "é",
          "a", "h", "1", "-", "~", "//", "http", "https", "HTTP"]
HEADS = ["", "http://", "https://", "http://h", "https://127.0.0.1:8080", "HTTP://h", "http:", "h://", " http://h",
         "http:/", "9x://", "."]
urls = st.builds(lambda head, parts: head + "".join(parts), st.sampled_from(HEADS), st.lists(st.sampled_from(PIECES),
                                                                                               max_size=8))


def outcome(check, location):
    try:
        return ("ok", check(location))
    except ValueError as exc:
        return ("ValueError", str(exc))


def components_by_urlsplit(location: str) -> None:
    """``check_components(location, "url")`` as it was before its fast path."""
    try:
        path = urlsplit(location).path
    except ValueError as exc:
        raise ValueError(f"bad URL ({exc})") from None
    for part in path.split("/"):
        if unquote(part) in (".", ".."):
            raise ValueError(f"has a {part!r} component")


def url_by_urlsplit(location: str) -> str:
    """``_check_url`` as it was before its fast path (whether it refuses, not its message)."""
    parts = urlsplit(location)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("not an http(s) URL with a host")
    return location


@settings(max_examples=300, deadline=None)
@given(urls)
def test_plain_urls_have_no_dot_component_and_never_make_urlsplit_raise(location):
    if plain_url(location):
        assert components_by_urlsplit(location) is None  # no component is "." or "..", no error


@settings(max_examples=300, deadline=None)
@given(urls)
def test_check_components_refuses_a_url_exactly_when_urlsplit_finds_a_dot_component(location):
    assert outcome(lambda u: check_components(u, "url"), location)[0] == outcome(components_by_urlsplit, location)[0]


@settings(max_examples=300, deadline=None)
@given(urls)
def test_the_http_location_check_refuses_exactly_what_urlsplit_refuses(location):
    mine, reference = outcome(_check_url, location), outcome(url_by_urlsplit, location)
    assert mine[0] == reference[0], (location, mine, reference)
    if mine[0] == "ok":
        assert mine[1] == location


@pytest.mark.parametrize("location", [
    "http://h/a", "https://127.0.0.1:8080/item/5?x=1", "http://h/a.b/c.d", "http://h/a%2F",
])
def test_ordinary_urls_take_the_fast_path(location):
    assert plain_url(location)  # a "%" inside a component does not start it


@pytest.mark.parametrize("location", [
    "http://h/./x", "http://h/%2e%2E/x", "http:..", "..", "http://[::1]/x", "http://h/\tx", " http://h/x",
    "http://h/é", "http://h/a b", "%2e",
])
def test_urls_urlsplit_may_read_otherwise_take_the_slow_path(location):
    assert not plain_url(location)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(list("aZ09.-_~%/?#&= é\x00\u2603")), max_size=8))
def test_a_url_template_value_is_written_percent_encoded_whatever_it_holds(value):
    template = Template("http://h/x/{v}/{index:03d}", v=lambda i: value)
    locations = Locations(template, length=1).bind("url", str)
    expected = f"http://h/x/{quote(value, safe='')}/000"
    if unquote(quote(value, safe="")) in (".", ".."):
        with pytest.raises(ValueError, match="component"):
            locations[0]
    else:
        assert locations[0] == expected
