# cython: freethreading_compatible=True
"""The native status vocabulary (``Status``): declared in ``_status.pxd``, which says the
two ranges and the raising rule; this module only gives Python the enum."""
