"""Running a function in a forked child, with a bounded wait (the fork tests' one helper)."""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable


def fork_and_wait(child: Callable[[], int], wait_s: float = 30.0) -> int:
    """Run ``child()`` in a forked child; its return value is the child's exit status (1 when
    it raised, with the traceback on stderr).  A child still running after ``wait_s`` is
    killed and the call raises ``AssertionError``."""
    with warnings.catch_warnings():
        # 3.12+: "This process is multi-threaded, use of fork() may lead to deadlocks in the
        # child" -- exactly what the engine must survive.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            code = child()
        except BaseException:
            traceback.print_exc(file=sys.stderr)
        finally:
            os._exit(code)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung")
