"""asyncio for xfer.Engine: awaitable transfers, segments and
notifications, resolved by the engine's completion callbacks.

The callbacks run on the engine's control thread, without the GIL: they
queue what happened and write an eventfd. That fd is added to the running
loop with ``loop.add_reader``, whose callback drains the queue and settles
the futures on the loop's thread. There is no polling thread: an idle
engine under an idle loop sleeps in epoll on both sides.
"""
import asyncio
import collections
import errno

from . import _xfer
from ._types import Notification, Registration, length_of, READ, WRITE


class AsyncEngine:
    """The asyncio half of xfer.Engine (a mixin of it)."""

    def _aio_init(self):
        self._loop = None
        self._aio_fd = None
        self._notes = collections.deque()
        self._note_waiters = collections.deque()
        self._listening = False

    # -- the loop -------------------------------------------------------
    def _aio_bind(self, loop):
        fd = self._aio_fileno()
        self._aio_unbind()
        loop.add_reader(fd, self._aio_drain)
        self._loop, self._aio_fd = loop, fd

    def _aio_unbind(self):
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._aio_fd)

    def _aio_closed(self):
        """The engine closed: fail what awaits a notification."""
        self._listening = False
        while self._note_waiters:
            w = self._note_waiters.popleft()
            if not w.done() and not w.get_loop().is_closed():
                w.set_exception(_xfer.XferError(errno.ECANCELED,
                                                "the engine closed"))

    def _aio_future(self):
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._aio_bind(loop)
        return loop.create_future()

    async def _aio_call(self, start, *args):
        fut = self._aio_future()
        start(fut, *args)
        return await fut

    async def _target(self, segment):
        if isinstance(segment, str):
            return await self.open_segment(segment)
        return segment

    # -- segments and memory --------------------------------------------
    async def open_segment(self, name):
        """Open a segment by name (xfer_segment_open_async; Mooncake's
        openSegment): ``host:port`` in p2p mode. Returns the Segment (the
        same one while it is open). Raises XferError: ECONNREFUSED,
        ETIMEDOUT, EHOSTUNREACH, ENOENT, EPROTO, EINVAL."""
        seg = self._segments.get(name)
        if seg is None:
            sid = await self._aio_call(self._aio_open, name)
            seg = self._segment_opened(name, sid)
        return seg

    async def register_async(self, obj, length=None, *, location="*",
                             remote_access=True):
        """register() (Mooncake's register_memory; ``length`` in bytes)
        without blocking the loop (xfer_register_async): the
        memory is registered, and usable as a source, at once; this
        returns once peers can see it. On a metadata server's error it
        raises XferError and the buffer stays registered (the engine
        publishes it again when the server is back)."""
        fut = self._aio_future()
        addr = self._aio_register(fut, obj, length, location, remote_access)
        reg = Registration(self, addr, length_of(obj, length),
                           None if isinstance(obj, int) else obj)
        await fut
        return reg

    # -- transfers ------------------------------------------------------
    async def _transfer(self, opcode, segment, pairs, notify):
        # the fast path of each write()/read(): no coroutine of its own
        # for a segment already open, and no done callback on the future
        if isinstance(segment, str):
            segment = await self.open_segment(segment)
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._aio_bind(loop)
        fut = loop.create_future()
        batch = self._aio_submit(fut, opcode, segment, pairs=pairs,
                                 notify=notify)
        try:
            await fut
        except asyncio.CancelledError:
            batch._on_future_done(fut)  # the awaiting task was cancelled
            raise

    async def write(self, segment, pairs, *, notify=None):
        """Write local sources to a segment; completes when every byte
        arrived (the batch's callback, through the loop). Mooncake's
        batch_transfer_async_write and get_batch_transfer_status in one
        awaitable.

        ``segment``: a Segment, its id, or a name (opened, then kept
        open). ``pairs``: [(source, target_address[, length]), ...] as in
        write_sync(): a source is an address in registered memory (with
        its length in bytes) or a buffer object in it, kept exported until
        the transfer is over. ``notify=(name, msg)`` goes to the segment's
        owner once every byte arrived. Cancelling the awaiting task
        cancels the batch (xfer_batch_cancel). Raises TransferError
        (``.outcome``, ``.statuses``) unless every request completed.
        """
        await self._transfer(WRITE, segment, pairs, notify)

    async def read(self, segment, pairs, *, notify=None):
        """Read from a segment into local sources (Mooncake's
        batch_transfer_async_read, awaited); as write(), lengths in bytes,
        same errors. Once the awaiting task is cancelled nothing more is
        written into the sources."""
        await self._transfer(READ, segment, pairs, notify)

    # -- notifications --------------------------------------------------
    async def notify(self, segment, name, msg):
        """Send a notification (Mooncake's Notify message) to a segment's
        owner; returns once it is queued there (xfer_notify_async).
        Raises XferError: ENOBUFS (its queue is full), EMSGSIZE, or the
        connection's error."""
        seg = await self._target(segment)
        await self._aio_call(self._aio_notify, seg, name, msg)

    def _on_notify(self, name, msg):
        note = Notification(name, msg)
        while self._note_waiters:
            w = self._note_waiters.popleft()
            if not w.done():
                w.set_result(note)
                return
        self._notes.append(note)

    async def recv_notify(self):
        """The next notification received, a Notification(name, msg)
        (Mooncake's get_notifies, awaited one at a time).
        From the first call on, notifications are delivered through the
        loop (xfer_engine_set_notify_cb) rather than queued for
        get_notify(), which still returns those not yet awaited."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._aio_bind(loop)
        if not self._listening:
            self._aio_listen(self._on_notify)
            self._listening = True
        if self._notes:
            return self._notes.popleft()
        fut = loop.create_future()
        self._note_waiters.append(fut)
        return await fut

    async def notifications(self):
        """Notifications as they arrive: ``async for n in
        engine.notifications()`` (recv_notify() in a loop)."""
        while True:
            yield await self.recv_notify()
