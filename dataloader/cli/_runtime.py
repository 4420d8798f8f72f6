"""One line describing the interpreter, for the output of ``bench`` and ``demo``."""

from __future__ import annotations

import os
import platform
import sys
import sysconfig

__all__ = ["describe_runtime"]


def describe_runtime() -> str:
    """e.g. ``'CPython 3.13.5 free-threaded (GIL disabled), 2 CPUs'``."""
    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        gil = "with the GIL"
    elif getattr(sys, "_is_gil_enabled", lambda: True)():
        gil = "free-threaded build, GIL re-enabled"
    else:
        gil = "free-threaded, GIL disabled"
    name = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{name} ({gil}), {os.cpu_count()} CPUs"
