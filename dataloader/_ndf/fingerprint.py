"""``fingerprint(dataset)``: what ``CachedDataset`` keys its `.ndf` cache by.

A SHA-256 (first 32 hex digits) of a description of the dataset, walked to a bounded depth
(``MAX_DEPTH``), each object once:

* the dataset's class (module and qualified name) and the code of every function defined in
  its class and base classes (outside ``dataloader`` and the standard library), and ``len``;
* its attributes (``vars``, ``__slots__``), recursively: numbers, strings, bytes, ``None``
  by value; tuples, lists, dicts, sets by their items; NumPy arrays by dtype, shape and a
  hash of their bytes (the first and last ``ARRAY_HASH_BYTES`` only, beyond twice that), and
  so objects with ``__array__`` (a CPU torch tensor, a pyarrow array);
  ``os.PathLike`` as its path;
* functions (a ``transform``, a lambda, a bound method, a ``functools.partial``, a callable
  object's ``__call__``): their source (``inspect.getsource``), or their bytecode and
  constants where there is no source; their defaults, closure cells, and the functions,
  classes and constants of their module that they name (the helpers they call).

What it cannot see: the contents of files, URLs or databases the dataset reads (same paths,
new bytes: the same fingerprint), state hidden in C extensions (their type is recorded, not
their contents), global state beyond the function's own module names (e.g. a module
attribute of another module, an environment variable), library versions (NumPy, Pillow), and
anything below ``MAX_DEPTH``.  A random transform gives the same fingerprint every time: it
must not be cached (see ``CachedDataset``).  Bytecode differs between Python versions, so a
function without source gives another fingerprint on another interpreter.  Where this is not
enough, pass ``CachedDataset(..., fingerprint="v3")``: that string alone is the key.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import sys
import types
from typing import Any

import numpy as np

__all__ = ["ARRAY_HASH_BYTES", "MAX_DEPTH", "fingerprint"]

MAX_DEPTH = 4  # dataset -> its transform -> a closure value -> that value's attributes
ARRAY_HASH_BYTES = 1 << 20  # 1 MiB of each end of a large array: a memmap is not read whole
_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def fingerprint(dataset: Any) -> str:
    """The hex key of ``dataset`` (its class, code, attributes, transforms and ``len``).

    Deterministic across processes for the same code and data description; costs a walk of
    the dataset's attributes (and a hash of its arrays' bytes, at most 2 MiB each).
    """
    walker = _Walker()
    walker.feed(dataset, 0)
    walker.add("len", str(len(dataset)))
    return walker.hash.hexdigest()[:32]


class _Walker:
    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.seen: set[int] = set()

    def add(self, *parts: str) -> None:
        for part in parts:
            self.hash.update(part.encode("utf-8", "surrogatepass"))
            self.hash.update(b"\0")

    def feed(self, obj: Any, depth: int) -> None:
        if isinstance(obj, _SCALARS):
            self.add(type(obj).__name__, repr(obj))
            return
        if isinstance(obj, np.generic):
            self.add(obj.dtype.str, repr(obj.item()))
            return
        if depth > MAX_DEPTH or id(obj) in self.seen:
            self.add("ref", _type_name(type(obj)))
            return
        self.seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            self._array(obj)
        elif isinstance(obj, (tuple, list, set, frozenset, dict)):
            self._container(obj, depth)
        elif isinstance(obj, os.PathLike):
            self.add("path", os.fspath(obj).__repr__())
        elif isinstance(obj, functools.partial):
            self.add("partial")
            for part in (obj.func, obj.args, obj.keywords):
                self.feed(part, depth + 1)
        elif isinstance(obj, (types.FunctionType, types.MethodType)):
            self._function(obj, depth)
        elif isinstance(obj, type):
            self._class(obj, depth)
        elif hasattr(obj, "__array__"):  # a torch tensor, a pyarrow array, ...: by its values
            self._array_like(obj, depth)
        else:
            self._object(obj, depth)

    def _array(self, a: np.ndarray) -> None:
        self.add("ndarray", a.dtype.str, repr(a.shape))
        if a.dtype.hasobject:
            self.add(repr(a.tolist()))
            return
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        if raw.size > 2 * ARRAY_HASH_BYTES:
            raw = np.concatenate([raw[:ARRAY_HASH_BYTES], raw[-ARRAY_HASH_BYTES:]])
        self.hash.update(raw.tobytes())

    def _array_like(self, obj: Any, depth: int) -> None:
        try:
            values = np.asarray(obj)
        except Exception:  # an exporter that cannot export: described by its attributes instead
            self._object(obj, depth)
            return
        self.add("array-like", _type_name(type(obj)))
        self._array(values)

    def _container(self, obj: Any, depth: int) -> None:
        self.add(type(obj).__name__, str(len(obj)))
        if isinstance(obj, dict):
            items: Any = sorted(obj.items(), key=lambda kv: repr(kv[0]))
            for key, value in items:
                self.feed(key, depth + 1)
                self.feed(value, depth + 1)
            return
        for item in (sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj):
            self.feed(item, depth + 1)

    def _function(self, fn: Any, depth: int) -> None:
        if isinstance(fn, types.MethodType):
            self.feed(fn.__self__, depth + 1)
            fn = fn.__func__
        self.add("function", fn.__module__ or "", fn.__qualname__)
        self._code(fn)
        self.feed(fn.__defaults__, depth + 1)
        self.feed(fn.__kwdefaults__, depth + 1)
        for cell in fn.__closure__ or ():
            try:
                self.feed(cell.cell_contents, depth + 1)
            except ValueError:  # an empty cell
                self.add("empty cell")
        module_globals = fn.__globals__
        for name in fn.__code__.co_names:
            value = module_globals.get(name)
            if isinstance(value, _SCALARS) or getattr(value, "__module__", None) == fn.__module__:
                self.add("global", name)
                self.feed(value, depth + 1)

    def _code(self, fn: types.FunctionType) -> None:
        try:
            self.add("source", inspect.getsource(fn))
        except (OSError, TypeError):
            self._bytecode(fn.__code__)

    def _bytecode(self, code: types.CodeType) -> None:
        self.add("code", code.co_code.hex(), repr(code.co_names))
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._bytecode(const)
            else:
                self.add(repr(const))

    def _class(self, cls: type, depth: int) -> None:
        self.add("class", _type_name(cls))
        for base in cls.__mro__:
            top = (base.__module__ or "").split(".")[0]
            if top in ("builtins", "dataloader") or top in sys.stdlib_module_names:
                continue
            for name, value in sorted(vars(base).items()):
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if isinstance(value, types.FunctionType):
                    self.add("method", name)
                    self._function(value, depth + 1)

    def _object(self, obj: Any, depth: int) -> None:
        cls = type(obj)
        self.feed(cls, depth)
        fields: dict[str, Any] = dict(getattr(obj, "__dict__", {}))
        for klass in cls.__mro__:
            for name in getattr(klass, "__slots__", ()):
                if isinstance(name, str) and hasattr(obj, name):
                    fields.setdefault(name, getattr(obj, name))
        self.add("fields", str(len(fields)))
        for name, value in sorted(fields.items()):
            self.add(name)
            self.feed(value, depth + 1)


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
