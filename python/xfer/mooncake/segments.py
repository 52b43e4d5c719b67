"""Mooncake's calls that lend more memory to a store as segments, mixed
into MooncakeDistributedStore: ``mount_segment``, ``unmount_segment``,
``allocate_and_mount_segment`` and ``unmount_and_free_segment``, with the
arguments, defaults and results of Mooncake's binding (store_py.cpp and
RealClient at its commit 3b5a594). Each segment is memory of this process
(a file mapped shared, or anonymous memory), registered with the store's
engine and mounted by the client's xfer_kv_mount_segment(); its id is a
UUID string, as Mooncake's. ``protocol`` and ``location`` are accepted
and have no effect: the store's engine moves the bytes with the protocol
given to setup()."""
import ctypes
import mmap
import os
import threading
import uuid

_PAGE = mmap.PAGESIZE
# Mooncake rounds allocations to its allocator's slab (4 MiB)
_SLAB = 4 << 20


def _address(m):
    """The address of mapping @p m (the temporary export goes at once)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


class SegmentCalls:
    """The segment calls of MooncakeDistributedStore (which has _kv)."""

    def _lent(self):
        if not hasattr(self, "_lent_segments"):
            self._lent_segments = {}
            self._lent_lock = threading.Lock()
        return self._lent_segments

    def _lend(self, m, size):
        """Mount mapping @p m: (ret, [id])."""
        kv = self._kv
        if kv is None:
            m.close()
            return -1, []
        addr = _address(m)
        ret = kv.mount_segment(addr, size)
        if ret:
            m.close()
            return ret, []
        sid = str(uuid.uuid4())
        with self._lent_lock:
            self._lent()[sid] = (m, addr, size)
        return 0, [sid]

    def mount_segment(self, path, size, offset=0, protocol="tcp",
                      location=""):
        """Map ``size`` bytes of the file at ``path`` from ``offset`` (a
        multiple of the page size) shared into this process and lend them
        to the store as one more segment, which the master allocates in as
        in setup()'s. Returns {"ret": 0 or negative, "segment_ids": [id]}:
        -1 (the file cannot be opened or mapped, the range is past its
        end or not aligned, the store is not set up), -600 (a size that is
        not a multiple of 64), -900 (the master is unreachable)."""
        self._lent()
        try:
            fd = os.open(os.fspath(path), os.O_RDWR)
        except OSError:
            return {"ret": -1, "segment_ids": []}
        try:
            end = os.fstat(fd).st_size
            if offset % _PAGE or offset > end or size > end - offset or \
                    not size:
                return {"ret": -1, "segment_ids": []}
            m = mmap.mmap(fd, size, mmap.MAP_SHARED,
                          mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
        except (OSError, ValueError, OverflowError):
            return {"ret": -1, "segment_ids": []}
        finally:
            os.close(fd)
        ret, ids = self._lend(m, size)
        return {"ret": ret, "segment_ids": ids}

    def allocate_and_mount_segment(self, size, protocol="tcp", location=""):
        """Allocate ``size`` bytes (rounded up to 4 MiB, as Mooncake's
        slabs) and lend them as one more segment. Returns {"ret",
        "segment_ids", "allocated_size"}; ret -1 for a size of 0 or no
        memory, else as mount_segment()."""
        self._lent()
        if size <= 0:
            return {"ret": -1, "segment_ids": [], "allocated_size": 0}
        total = -(-size // _SLAB) * _SLAB
        try:
            m = mmap.mmap(-1, total)
        except (OSError, OverflowError):
            return {"ret": -1, "segment_ids": [], "allocated_size": 0}
        ret, ids = self._lend(m, total)
        return {"ret": ret, "segment_ids": ids,
                "allocated_size": total if not ret else 0}

    def _unlend(self, sid):
        with self._lent_lock:
            entry = self._lent().get(sid)
        if entry is None:
            return -1
        m, addr, size = entry
        kv = self._kv
        ret = kv.unmount_segment(addr, size) if kv is not None else 0
        if ret:
            return ret            # kept mounted, as Mooncake keeps it
        with self._lent_lock:
            self._lent().pop(sid, None)
        m.close()
        return 0

    def unmount_segment(self, segment_ids, grace_period_seconds=0):
        """Unmount the segments of ``segment_ids`` (objects that lay only
        there are gone) and unmap them; with ``grace_period_seconds``,
        that happens so many seconds later and this returns at once.
        Returns 0, or the first error: -1 (an id not mounted here), the
        master's (-900 unreachable: that segment stays mounted)."""
        ids = list(segment_ids)
        self._lent()
        if grace_period_seconds:
            with self._lent_lock:
                unknown = [s for s in ids if s not in self._lent()]
            later = threading.Timer(grace_period_seconds,
                                    lambda: [self._unlend(s) for s in ids])
            later.daemon = True
            later.start()
            return -1 if unknown else 0
        first = 0
        for sid in ids:
            ret = self._unlend(sid)
            first = first or ret
        return first

    def unmount_and_free_segment(self, segment_ids, grace_period_seconds=0):
        """unmount_segment() of segments of allocate_and_mount_segment():
        their memory is freed with them."""
        return self.unmount_segment(segment_ids, grace_period_seconds)

    def _unlend_all(self):
        """close(): the client unmounts every segment as it goes; the
        mappings go after it."""
        self._lent()
        with self._lent_lock:
            entries = list(self._lent().values())
            self._lent().clear()
        return entries
