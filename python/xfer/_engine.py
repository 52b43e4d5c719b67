"""xfer.Engine: the native API (blocking forms here, asyncio in _aio.py)."""
from . import _xfer
from ._aio import AsyncEngine
from ._types import (Notification, Registration, Segment, length_of, READ,
                     WRITE)


class Engine(AsyncEngine, _xfer._Engine):
    """An xfer engine: its own control thread and worker threads, the
    listeners, registered memory, open segments.

    ``Engine(config=None, **keys)``: configuration keys (include/xfer/xfer.h
    lists them, with units and ranges) from a dict and keywords, e.g.
    ``Engine(metadata_server="p2p", bind_addr="127.0.0.1")``; the
    environment (XFER_*, MC_*) gives the rest. Raises XferError: EINVAL
    (bad configuration), ENOENT (unknown key), EADDRINUSE,
    ECONNREFUSED (metadata server down), EPROTONOSUPPORT.

    A context manager (also ``async with``) that closes it. Every blocking
    call releases the GIL while it waits.
    """

    def __init__(self, config=None, /, **keys):
        cfg = dict(config or {})
        cfg.update(keys)
        _xfer._Engine.__init__(self, cfg)
        self._segments = {}
        self._aio_init()

    def __repr__(self):
        state = "closed" if self.closed else repr(self.name)
        return f"<xfer.Engine {state}>"

    # -- lifetime -------------------------------------------------------
    def close(self):
        """Cancel what is in flight (pending futures fail), stop and free
        the engine. Memory registered stays the caller's. Idempotent."""
        self._aio_unbind()
        super().close()
        self._aio_closed()
        self._segments.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()

    # -- memory ---------------------------------------------------------
    def register(self, obj, length=None, *, location="*",
                 remote_access=True):
        """Register memory (Mooncake's registerLocalMemory; xfer_register)
        and wait, without the GIL, until peers can see it.

        ``obj``: an integer address (then ``length`` in bytes is needed)
        or a writable buffer object (its length, or a shorter ``length``).
        ``location``: ``cpu:N`` or ``*``. Returns a Registration (a
        context manager). Raises XferError: EINVAL, EEXIST (overlaps a
        registered buffer), ENOMEM.
        """
        addr = super().register(obj, length, location, remote_access)
        return Registration(self, addr, length_of(obj, length),
                            None if isinstance(obj, int) else obj)

    def unregister(self, reg):
        """Unregister the buffer at ``reg`` (a Registration, an address or
        the buffer object) and wait until peers see it gone
        (Mooncake's unregister_memory; xfer_unregister). Raises XferError: ENOENT (nothing registered
        there), EBUSY (a transfer uses it)."""
        if isinstance(reg, Registration):
            reg = reg.addr
        super().unregister(reg)

    # -- segments -------------------------------------------------------
    def open_segment_sync(self, name):
        """Open a segment by name (Mooncake's openSegment): ``host:port``
        in p2p mode, a segment name with a metadata server. Waits without
        the GIL; returns the Segment (the same one while it is open).
        Raises XferError: ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENOENT,
        EPROTO."""
        seg = self._segments.get(name)
        if seg is None:
            seg = self._segment_opened(name, super().open_segment_sync(name))
        return seg

    def _segment_opened(self, name, sid):
        return self._segments.setdefault(name, Segment(self, name, sid))

    def _segment_closed(self, seg):
        self.segment_close(seg.id)
        if self._segments.get(seg.name) is seg:
            del self._segments[seg.name]

    def _target_sync(self, segment):
        if isinstance(segment, str):
            return self.open_segment_sync(segment)
        return segment

    # -- transfers ------------------------------------------------------
    def write_sync(self, segment, pairs, *, notify=None):
        """Write local sources to a segment and wait, without the GIL
        (Mooncake's batch_transfer_sync_write).

        ``segment``: a Segment, its id, or a name (opened and kept open).
        ``pairs``: [(source, target_address[, length]), ...]: a source is
        an integer address inside registered memory (then the length in
        bytes is needed) or a buffer object in it; ``target_address`` is
        a peer buffer's ``addr`` plus an offset. ``notify=(name, msg)`` is
        sent to the segment's owner once every byte arrived (Mooncake's
        submitTransferWithNotify). Raises TransferError (``.outcome``,
        ``.statuses``) unless every request completed; XferError.
        """
        self.transfer(WRITE, self._target_sync(segment), pairs=pairs,
                      notify=notify)

    def read_sync(self, segment, pairs, *, notify=None):
        """Read from a segment into local sources (Mooncake's
        batch_transfer_sync_read); as write_sync(): lengths in bytes, the
        same errors."""
        self.transfer(READ, self._target_sync(segment), pairs=pairs,
                      notify=notify)

    # -- notifications --------------------------------------------------
    def notify_sync(self, segment, name, msg):
        """Send a notification (Mooncake's Notify message) to a segment's
        owner and wait, without the GIL, until it is queued there. Raises
        XferError: ENOBUFS (the peer's queue is full), EMSGSIZE, or the
        connection's error."""
        super().notify_sync(self._target_sync(segment), name, msg)

    def get_notify(self):
        """The oldest notification received, or None (Mooncake's
        getNotifsFromEngine, one at a time)."""
        if self._notes:
            return self._notes.popleft()
        n = self.notify_pop()
        return Notification(*n) if n else None

    def get_notifies(self):
        """Every notification received so far, oldest first (Mooncake's
        get_notifies), [Notification, ...]."""
        out = []
        while (n := self.get_notify()) is not None:
            out.append(n)
        return out
