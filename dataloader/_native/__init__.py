"""Native (Cython) primitives. Private: nothing here is public API."""
