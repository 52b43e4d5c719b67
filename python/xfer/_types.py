"""The values of the native API: statuses, opcodes, notifications,
segments and registrations."""
import enum
from typing import NamedTuple

from . import _xfer


class Status(enum.IntEnum):
    """Status of a task, Mooncake's TransferStatusEnum (values too)."""
    WAITING = _xfer.WAITING
    PENDING = _xfer.PENDING
    INVALID = _xfer.INVALID
    CANCELED = _xfer.CANCELED
    COMPLETED = _xfer.COMPLETED
    TIMEOUT = _xfer.TIMEOUT
    FAILED = _xfer.FAILED


class Opcode(enum.IntEnum):
    """Operation of a request: READ copies target -> local source, WRITE
    local source -> target."""
    READ = _xfer.READ
    WRITE = _xfer.WRITE


READ = Opcode.READ
WRITE = Opcode.WRITE


class Notification(NamedTuple):
    """A notification received: Mooncake's NotifyDesc (name, msg)."""
    name: str
    msg: str


class SegmentBuffer(NamedTuple):
    """A buffer of an open segment: ``addr`` is what a request names as
    its target (plus an offset), ``length`` in bytes."""
    addr: int
    length: int
    location: str


class Segment:
    """An open segment (Mooncake's SegmentHandle): a peer's memory, or the
    engine's own. Usable wherever a segment id is (``__index__``); a
    context manager that closes it."""

    def __init__(self, engine, name, sid):
        self.engine = engine
        self.name = name
        self.id = sid

    def __index__(self):
        return self.id

    def __repr__(self):
        return f"<xfer.Segment {self.name!r} id={self.id}>"

    @property
    def buffers(self):
        """The segment's buffers as known now, [SegmentBuffer, ...]:
        addresses and lengths in bytes (Mooncake's SegmentDesc buffers;
        get_first_buffer_address is ``buffers[0].addr``)."""
        return [SegmentBuffer(*b) for b in self.engine.segment_buffers(
            self.id)]

    def refresh_sync(self):
        """Fetch the descriptor again (buffers the peer registered since;
        Mooncake's send_probe does this); waits without the GIL. Raises
        XferError (ENOENT: the segment is gone, or the fetch's error)."""
        self.engine.segment_refresh_sync(self.id)

    async def refresh(self):
        """refresh_sync() awaited (xfer_segment_refresh_async); the same
        errors."""
        await self.engine._aio_call(self.engine._aio_refresh, self.id)

    def close(self):
        """Close the id (Mooncake's closeSegment). Raises XferError EBUSY
        while transfers to it are in flight."""
        self.engine._segment_closed(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Registration:
    """Registered local memory: ``addr`` and ``length`` (bytes). A context
    manager that unregisters it; a buffer object stays exported (so not
    resizable) while registered."""

    def __init__(self, engine, addr, length, obj=None):
        self.engine = engine
        self.addr = addr
        self.length = length
        self.obj = obj

    def __repr__(self):
        return f"<xfer.Registration 0x{self.addr:x} {self.length} bytes>"

    def unregister(self):
        """Unregister (Mooncake's unregister_memory); see
        Engine.unregister for the errors. Idempotent."""
        if self.engine is not None and not self.engine.closed:
            self.engine.unregister(self.addr)
        self.engine = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unregister()


def length_of(obj, length):
    """The length in bytes a register call gives or takes from obj."""
    if length is not None or isinstance(obj, int):
        return length
    return _xfer.address_of(obj)[1]
