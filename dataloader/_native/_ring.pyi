"""Type stubs for the claim window + reorder ring (private).

Claims and waits return a batch number (``>= 0``) or a negative ``Status``
(``_status.pyi``); they raise only for a misuse of the window (arguments, kind, state).
"""

class Window:
    def __init__(self, size: int, owners: int = 0, cpus: int = 0) -> None:
        """``cpus``: CPUs the epoch's threads may use (0: the machine's), for the rule that a
        thread spins before it sleeps only while the threads wanting a core fit in them."""
    @property
    def size(self) -> int: ...
    @property
    def owners(self) -> int: ...
    @property
    def limit(self) -> int:
        """Workers below it may run native batch jobs (``num_workers="auto"`` sets it)."""
    @limit.setter
    def limit(self, value: int) -> None: ...
    @property
    def base(self) -> int: ...
    @property
    def published(self) -> int: ...
    @property
    def claimed(self) -> int: ...
    @property
    def cancelled(self) -> bool: ...
    @property
    def active(self) -> int: ...
    def publish(self, owner: int = -1) -> int:
        """Hand out the next batch; its task must already be in its slot.

        Args:
            owner: the worker that builds it: -1 (any worker) in an untagged window,
                ``0 <= owner < owners`` in a tagged one.

        Returns:
            The batch number ``k`` just published (its slot is ``k % size``), or
            ``Status.CANCELLED`` when the epoch was cancelled (by ``cancel()`` from any thread).

        Raises:
            RuntimeError: the window is full (``published == base + size``) or the
                epoch was finished.
            ValueError: ``owner`` does not fit the window's kind.
        """
    def finish(self) -> None: ...
    def cancel(self) -> None: ...
    def wait(self, k: int, timeout_s: float = 0.0) -> int:
        """Block until batch ``k``'s result is in its slot.

        The GIL is released while waiting; signal handlers run every 50 ms, so
        ``KeyboardInterrupt`` propagates.

        Args:
            k: batch number, ``base <= k < published``.
            timeout_s: seconds to wait at most; ``0`` waits without limit.

        Returns:
            ``k`` when ready, ``Status.TIMED_OUT`` when ``timeout_s`` passed, ``Status.CANCELLED``
            when the epoch was cancelled.
        """
    def wait_any(self, timeout_s: float = 0.0) -> int:
        """Block until some batch in the window has its result (completion order).

        Returns:
            The smallest ready batch number, ``Status.TIMED_OUT`` or ``Status.CANCELLED``.

        Raises:
            ValueError: no batch is published and not taken.
        """
    def release(self, k: int) -> None:
        """Mark batch ``k`` as taken and move the window's base past taken slots.

        Raises:
            ValueError: ``k`` is not a ready batch in the window.
        """
    def claim(self, worker_id: int = -1) -> int:
        """Claim the next batch for ``worker_id``, sleeping (GIL released) until one is
        published.

        In an untagged window any batch is for any worker (``worker_id`` is not
        used); in a tagged one, only the batches published for ``worker_id``.

        Returns:
            The batch number, or ``Status.END`` when the epoch is finished and every batch
            (of this worker) is claimed, or cancelled.
        """
    def try_claim(self) -> int:
        """Claim the next published batch without waiting (an untagged window only).

        Returns:
            The batch number, ``Status.EMPTY`` when no published batch is unclaimed, or
            ``Status.CANCELLED`` when the epoch was cancelled.

        Raises:
            ValueError: the window is tagged (``owners > 0``).
        """
    def complete(self, k: int) -> None: ...
    def enter(self, n: int = 1) -> None: ...
    def leave(self) -> None: ...
    def wait_idle(self, timeout_s: float) -> bool:
        """Wait (GIL released) until no worker is active; True if that happened in time.

        Waits in 50 ms slices and runs signal handlers between them, so Ctrl-C
        (``KeyboardInterrupt``) ends the wait.  ``timeout_s <= 0`` only checks.
        """
