"""Type stubs for the core of the claim window + reorder ring (private; see ``_ring.pyi``)."""

class WindowCore:
    """State and nogil internals of ``_ring.Window``; nothing of it is called from Python."""

    def __init__(self, size: int, owners: int = 0, cpus: int = 0) -> None: ...
