"""Mooncake's Python store client (``mooncake.store``) on xfer's store.

Switch with one line::

    from mooncake.store import MooncakeDistributedStore     # before
    from xfer.mooncake.store import MooncakeDistributedStore  # after

Method names, argument orders, defaults and return conventions are those
of Mooncake's binding (mooncake-integration/store/store_py.cpp and its
RealClient) at its commit 3b5a594: calls return 0 or a negative
Mooncake ErrorCode (-200 no space, -600 invalid parameters, -704 not
found, -706 leased, -707 lease expired, -800 transfer failed, -900 the
master unreachable; -1 for a local failure), ``get`` returns ``b""`` on a
miss, ``is_exist`` 1/0/negative. No call raises for a store error; a
wrong argument type raises TypeError, as pybind11's does. Addresses are
integers, lengths bytes. Every call that waits releases the GIL.

Underneath is one client of xfer-stored (include/xfer/store.h, docs/
STORE.md) with an engine of its own. docs/PYTHON.md tables every call
against Mooncake's. ``MooncakeDistributedStoreAsync`` (xfer.mooncake.
async_store) awaits the same calls on the client's own callbacks.
"""
import errno
import operator
import os
import re

from .. import _xfer
from .config import (FlushMode, ObjectDataType, ReplicateConfig,
                     SoftPinAction)
from .replica import (Descriptor, MemoryDescriptor, ReplicaDescriptor,
                      ReplicaStatus)
from .segments import SegmentCalls
from .tasks import QueryTaskResponse, TaskCalls, TaskStatus, TaskType

__all__ = [
    "MooncakeDistributedStore", "ReplicateConfig", "SoftPinAction",
    "ObjectDataType", "FlushMode", "BufferHandle", "ReplicaDescriptor",
    "ReplicaStatus", "MemoryDescriptor", "Descriptor", "TaskType",
    "TaskStatus", "QueryTaskResponse",
]

# Mooncake's ErrorCode numbers the calls return (its types.h)
INTERNAL_ERROR = -1
INVALID_PARAMS = -600
RPC_FAIL = -900

# health_check()'s answers (its pyclient.h)
HC_HEALTHY, HC_NOT_INITIALIZED, HC_MASTER_UNREACHABLE = 0, 1, 2

# Mooncake's defaults (its types.h)
DEFAULT_GLOBAL_SEGMENT_SIZE = 16 << 20
DEFAULT_LOCAL_BUFFER_SIZE = 16 << 20
DEFAULT_MASTER_SERVER_ADDR = "127.0.0.1:50051"
DEFAULT_CLIENT_HTTP_PORT = 9300
MIN_SEGMENT_SIZE = 1024
MAX_SEGMENT_SIZE = 1 << 40

# An object read into memory of its own: ptr(), size(), len() and the
# buffer protocol (Mooncake's BufferHandle).
BufferHandle = _xfer.KVBuffer


_DEFAULT_CONFIG = ReplicateConfig()

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "T": 1 << 40,
          "TB": 1 << 40}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%|[A-Za-z]*)"
                   r"\s*")


def parse_size(text):
    """Bytes from a size as setup(dict) takes it: a number with an optional
    unit B, K/KB, M/MB, G/GB, T/TB (any case, powers of 1024; Mooncake's
    try_string_to_byte_size), or ``"N%"``: N percent of this host's
    physical memory (xfer's). None if it is not one."""
    m = _SIZE.fullmatch(str(text))
    if not m:
        return None
    value, unit = float(m.group(1)), m.group(2).upper()
    if unit == "%":
        if not 0 < value <= 100:
            return None
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return int(phys * value / 100)
    return int(value * _UNITS[unit]) if unit in _UNITS else None


def _conn_string(metadata_server):
    """Mooncake's: P2PHANDSHAKE or a URL as is, else an etcd host:port."""
    if metadata_server == "P2PHANDSHAKE" or "://" in metadata_server:
        return metadata_server
    return f"etcd://{metadata_server}"


def _setup_error(err):
    """setup()'s code for the errno of a client that could not start."""
    if err == errno.EINVAL:
        return INVALID_PARAMS
    if err in (errno.ENOENT, errno.ECONNREFUSED, errno.ETIMEDOUT,
               errno.EACCES, errno.EPROTO, errno.ECONNRESET,
               errno.EHOSTUNREACH):
        return RPC_FAIL
    return INTERNAL_ERROR


class _Done:
    """A call answered without the client (bad arguments, not set up)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _descs(d):
    """A key's answer of replica_desc(): descriptors, or [] on error."""
    return [] if isinstance(d, int) else [ReplicaDescriptor(*t) for t in d]


def _first(results):
    return results[0]


def _first_error(results):
    return next((r for r in results if r < 0), 0)


def _as_bytes(results):
    return [r if isinstance(r, bytes) else b"" for r in results]


def _as_handles(results):
    return [None if isinstance(r, int) else r for r in results]


def _registered(r):
    """register_buffer()'s answer: Mooncake's -600 for a refused range."""
    return 0 if r == 0 else INTERNAL_ERROR if r == -errno.ENOMEM else \
        INVALID_PARAMS


def _stored(r):
    """A store call's answer: its code, or -1 for an errno."""
    return r if r == 0 or r <= -100 else INTERNAL_ERROR


class MooncakeDistributedStore(TaskCalls, SegmentCalls):
    """Mooncake's MooncakeDistributedStore: a client of the store's master
    (xfer-stored) that lends ``global_segment_size`` bytes of this
    process's memory to the store and puts and gets objects by key. Make
    it, then setup() it; close() it when done (also done when it is
    collected)."""

    def __init__(self):
        self._kv = None
        self._ssd = False              # mount_file() done

    # -- setup ------------------------------------------------------------
    def setup(self, *args, **kwargs):
        """``setup(local_hostname, metadata_server, global_segment_size,
        local_buffer_size, protocol, rdma_devices, master_server_addr,
        engine=None, enable_ssd_offload=False, ssd_offload_path="",
        tenant_id="default", enable_client_http_server=False,
        client_http_port=9300)`` or ``setup(config)``, a dict whose values
        are strings (sizes such as ``"4gb"`` or ``"50%"`` of this host's
        memory; only ``local_hostname`` and ``metadata_server`` required).
        Starts an engine named ``local_hostname`` (``host``, or
        ``host:port``: the port its handshake listens on), lends it
        ``global_segment_size`` bytes (0: none) and stages plain puts and
        gets through ``local_buffer_size`` bytes, then connects to the
        master at ``master_server_addr`` and mounts the segment. Returns
        0; -600 (a bad argument, or what xfer lacks: ``engine``, SSD
        offload, a tenant other than ``"default"``); -900 (the master is
        unreachable, or refused the segment); -1. Set up again, it
        replaces the client, as Mooncake's does."""
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            return self._setup_dict(args[0])
        if not args and set(kwargs) == {"config"}:
            return self._setup_dict(kwargs["config"])
        return self._setup(*args, **kwargs)

    def _setup(self, local_hostname, metadata_server, global_segment_size,
               local_buffer_size, protocol, rdma_devices, master_server_addr,
               engine=None, enable_ssd_offload=False, ssd_offload_path="",
               tenant_id="default", enable_client_http_server=False,
               client_http_port=DEFAULT_CLIENT_HTTP_PORT):
        seg = operator.index(global_segment_size)
        buf = operator.index(local_buffer_size)
        if engine is not None or enable_ssd_offload or \
                tenant_id != "default" or not local_hostname or \
                seg < 0 or buf < 0:
            return INVALID_PARAMS
        cfg = {"local_server_name": local_hostname,
               "metadata_server": _conn_string(metadata_server),
               "protocol": protocol or "tcp"}
        if rdma_devices and rdma_devices != "auto-discovery":
            cfg["device_names"] = rdma_devices
        self.close()
        try:
            self._kv = _xfer._KV(cfg, master_server_addr or
                                 DEFAULT_MASTER_SERVER_ADDR, seg, buf)
        except _xfer.XferError as e:
            return _setup_error(e.errno)
        return 0

    def _setup_dict(self, config):
        conf = {str(k): str(v) for k, v in config.items()}
        sizes = []
        for key, default in (("global_segment_size",
                              DEFAULT_GLOBAL_SEGMENT_SIZE),
                             ("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)):
            size = parse_size(conf[key]) if key in conf else default
            if size is None or 0 < size < MIN_SEGMENT_SIZE:
                return INVALID_PARAMS
            sizes.append(size)
        if sizes[1] > MAX_SEGMENT_SIZE or not conf.get("metadata_server"):
            return INVALID_PARAMS
        offload = conf.get("enable_ssd_offload", "false").strip().lower()
        return self._setup(
            conf.get("local_hostname", ""), conf["metadata_server"],
            sizes[0], sizes[1], conf.get("protocol", "tcp"),
            conf.get("rdma_devices", ""),
            conf.get("master_server_addr", DEFAULT_MASTER_SERVER_ADDR),
            enable_ssd_offload=offload in ("1", "true", "yes", "on"),
            tenant_id=conf.get("tenant_id", "default").strip() or "default")

    def init_all(self, protocol, device_name,
                 mount_segment_size=DEFAULT_GLOBAL_SEGMENT_SIZE):
        """Mooncake's shorthand: setup("localhost", peer to peer,
        ``mount_segment_size``, a 1 GiB staging buffer, ``protocol``,
        ``device_name``, the master at 127.0.0.1:50051). -600 if set up
        already."""
        if self._kv is not None:
            return INVALID_PARAMS
        return self._setup("localhost", "P2PHANDSHAKE", mount_segment_size,
                           1 << 30, protocol, device_name,
                           DEFAULT_MASTER_SERVER_ADDR)

    def close(self):
        """Wait for the calls in flight, unmount the segment and free the
        client (objects whose replicas lay only in it are gone). Returns
        0; later calls answer as before setup()."""
        kv, self._kv = self._kv, None
        self._ssd = False
        lent = self._unlend_all()
        if kv is not None:
            kv.close()          # unmounts the segments lent too
        for m, _, _ in lent:
            m.close()
        return 0

    def set_root_fs_dir(self, path):
        """xfer's: the slower tier, a folder (local, or a POSIX mount the
        clients share) where puts with ``ReplicateConfig.flush`` write
        one file per key, and from which gets of objects no longer in
        DRAM read them back (xfer_kv_set_root_fs_dir). Once, after
        setup(). Returns 0; -600 (not set up); a negative errno (-2: no
        such folder, -16: already set)."""
        kv = self._kv
        if kv is None:
            return INVALID_PARAMS
        return kv.set_root_fs_dir(os.fspath(path))

    def health_check(self):
        """0 healthy; 1 not set up, or closed; 2 the master did not
        answer the last ping (every second)."""
        kv = self._kv
        if kv is None:
            return HC_NOT_INITIALIZED
        return HC_HEALTHY if kv.healthy() else HC_MASTER_UNREACHABLE

    def get_hostname(self):
        """This client's segment name, ``host:port`` (its engine's); ``""``
        before setup()."""
        kv = self._kv
        return kv.name if kv is not None else ""

    def register_buffer(self, buffer_ptr, size):
        """Register ``size`` bytes at ``buffer_ptr`` for the zero-copy calls
        (put_from, get_into and their batches). Returns 0, or -600 (not
        set up, overlapping a registered range, zero length); -1."""
        kv = self._kv
        return INVALID_PARAMS if kv is None else \
            _registered(kv.register_buffer(buffer_ptr, size))

    def unregister_buffer(self, buffer_ptr):
        """Unregister memory of register_buffer(): 0, or -600 (not
        registered, or not set up)."""
        kv = self._kv
        return INVALID_PARAMS if kv is None else \
            _registered(kv.unregister_buffer(buffer_ptr))

    def mount_file(self, path, size=0):
        """xfer's: lend the file (or block device) at ``path`` to the
        store as an SSD segment, ``size`` bytes (0: the file's size), that
        ``ReplicateConfig.nof_replica_num`` and the master's offload put
        objects in (docs/STORE.md, SSD segments). One per store; after
        setup(). Returns 0, -600 (not set up, one mounted already, no such
        file, a size under 64), -900 (the master refused or is
        unreachable), or -1."""
        kv = self._kv
        if kv is None or self._ssd:
            return INVALID_PARAMS
        r = kv.mount_file(os.fspath(path), operator.index(size))
        if r == 0:
            self._ssd = True
            return 0
        if r in (-errno.EINVAL, -errno.EEXIST, -errno.ENOENT,
                 -errno.EACCES, -errno.EISDIR):
            return INVALID_PARAMS
        if r in (-errno.EPROTO, -errno.ECONNRESET, -errno.ETIMEDOUT):
            return RPC_FAIL
        return INTERNAL_ERROR

    # -- the calls, each a plan that _call() runs, blocking (here) or
    #    awaited (MooncakeDistributedStoreAsync) --------------------------
    def _call(self, plan):
        if isinstance(plan, _Done):
            return plan.value
        kv, method, args, kwargs, finish, idle = plan
        try:
            return finish(getattr(kv, method)(*args, **kwargs))
        except ValueError:
            if self._kv is not kv:  # closed meanwhile by another thread
                return idle
            raise

    def _plan(self, idle, method, *args, finish=_first, **kwargs):
        """The client's ``method``, its result through ``finish``; ``idle``
        if not set up."""
        kv = self._kv
        if kv is None:
            return _Done(idle)
        return kv, method, args, kwargs, finish, idle

    def _plan_put(self, keys, parts, counts, lens, config, zero_copy,
                  finish=_first, idle=INVALID_PARAMS, upsert=False):
        rc = (config if config is not None else _DEFAULT_CONFIG)._args()
        if rc is None:
            return _Done(finish([INVALID_PARAMS] * len(keys)))
        return self._plan(idle, "put", keys, parts, counts=counts,
                          lens=lens, rc=rc, zero_copy=zero_copy,
                          upsert=upsert, finish=finish)

    def _p_put(self, key, value, config=_DEFAULT_CONFIG, upsert=False):
        return self._plan_put([key], [value], None, None, config, False,
                              upsert=upsert)

    def _p_put_parts(self, key, *parts, config=_DEFAULT_CONFIG,
                     upsert=False):
        return self._plan_put([key], list(parts), [len(parts)], None,
                              config, False, upsert=upsert)

    def _p_put_batch(self, keys, values, config=_DEFAULT_CONFIG,
                     upsert=False):
        if len(keys) != len(values):
            return _Done(INVALID_PARAMS)
        if not keys:
            return _Done(0)
        return self._plan_put(keys, values, None, None, config, False,
                              finish=_first_error, upsert=upsert)

    def _p_put_from(self, key, buffer_ptr, size, config=_DEFAULT_CONFIG,
                    upsert=False):
        if self._kv is not None and size == 0:
            return _Done(0)  # Mooncake's: an empty put does nothing
        return self._plan_put([key], [buffer_ptr], None, [size], config,
                              True, upsert=upsert)

    def _p_batch_put_from(self, keys, buffer_ptrs, sizes,
                          config=_DEFAULT_CONFIG, upsert=False):
        if self._kv is None or not len(keys) == len(buffer_ptrs) == \
                len(sizes):
            return _Done([INVALID_PARAMS] * len(keys))
        if not keys:
            return _Done([])
        return self._plan_put(keys, buffer_ptrs, None, sizes, config, True,
                              finish=list, idle=[INVALID_PARAMS] * len(keys),
                              upsert=upsert)

    # upserts: the puts above replacing what is there (Mooncake's names)
    def _p_upsert(self, key, value, config=_DEFAULT_CONFIG):
        return self._p_put(key, value, config, upsert=True)

    def _p_upsert_parts(self, key, *parts, config=_DEFAULT_CONFIG):
        return self._p_put_parts(key, *parts, config=config, upsert=True)

    def _p_upsert_batch(self, keys, values, config=_DEFAULT_CONFIG):
        return self._p_put_batch(keys, values, config, upsert=True)

    def _p_upsert_from(self, key, buffer_ptr, size, config=_DEFAULT_CONFIG):
        return self._p_put_from(key, buffer_ptr, size, config, upsert=True)

    def _p_batch_upsert_from(self, keys, buffer_ptrs, sizes,
                             config=_DEFAULT_CONFIG):
        return self._p_batch_put_from(keys, buffer_ptrs, sizes, config,
                                      upsert=True)

    # xfer's own: versions and sync
    def _p_get_versioned(self, key, buffer, min_version=0):
        return self._plan((INVALID_PARAMS, 0), "get_version", key, [buffer],
                          min_version=min_version, finish=tuple)

    def _p_get_into_versioned(self, key, buffer_ptr, size, min_version=0):
        return self._plan((INVALID_PARAMS, 0), "get_version", key,
                          [buffer_ptr], lens=[size], zero_copy=True,
                          min_version=min_version, finish=tuple)

    def _p_get_replica_desc(self, key):
        return self._plan([], "replica_desc", [key],
                          finish=lambda r: _descs(r[0]))

    def _p_batch_get_replica_desc(self, keys):
        return self._plan({}, "replica_desc", keys, finish=lambda r: {
            k: _descs(d) for k, d in zip(keys, r) if not isinstance(d, int)})

    def _p_batch_replica_clear(self, keys, segment_name=""):
        if not keys:
            return _Done([])
        return self._plan([], "replica_clear", keys, segment_name,
                          finish=lambda r: [k for k, e in zip(keys, r)
                                            if e == 0])

    def _p_sync(self):
        return self._plan(INVALID_PARAMS, "sync", finish=int)

    def _p_remove_by_regex(self, regex_pattern, force=False):
        return self._plan(INVALID_PARAMS, "remove_by_regex", regex_pattern,
                          force=force, finish=int)

    def _p_batch_put_from_multi_buffers(self, keys, all_buffer_ptrs,
                                        all_sizes, config=_DEFAULT_CONFIG):
        flat = self._flatten(keys, all_buffer_ptrs, all_sizes)
        if self._kv is None:
            return _Done([])
        if flat is None:
            return _Done([INVALID_PARAMS] * len(keys))
        if not keys:
            return _Done([])
        ptrs, sizes, counts = flat
        return self._plan_put(keys, ptrs, counts, sizes, config, True,
                              finish=list, idle=[])

    @staticmethod
    def _flatten(keys, all_ptrs, all_sizes):
        """(addresses, lengths, counts) of per-key lists, or None if their
        shapes differ."""
        if not len(keys) == len(all_ptrs) == len(all_sizes) or any(
                len(p) != len(s) for p, s in zip(all_ptrs, all_sizes)):
            return None
        return ([a for p in all_ptrs for a in p],
                [n for s in all_sizes for n in s],
                [len(p) for p in all_ptrs])

    def _p_get(self, key):
        return self._plan(b"", "fetch", [key],
                          finish=lambda r: _as_bytes(r)[0])

    def _p_get_batch(self, keys):
        if not keys:
            return _Done([b""])  # Mooncake's answer to no key
        return self._plan([b""], "fetch", keys, finish=_as_bytes)

    def _p_get_buffer(self, key):
        return self._plan(None, "fetch", [key], as_bytes=False,
                          finish=lambda r: _as_handles(r)[0])

    def _p_batch_get_buffer(self, keys):
        if not keys:
            return _Done([])
        return self._plan([None] * len(keys), "fetch", keys, as_bytes=False,
                          finish=_as_handles)

    def _p_get_into(self, key, buffer_ptr, size):
        return self._plan(INVALID_PARAMS, "get", [key], [buffer_ptr],
                          lens=[size], zero_copy=True)

    def _p_batch_get_into(self, keys, buffer_ptrs, sizes):
        if self._kv is None or not len(keys) == len(buffer_ptrs) == \
                len(sizes):
            return _Done([INVALID_PARAMS] * len(keys))
        if not keys:
            return _Done([])
        return self._plan([INVALID_PARAMS] * len(keys), "get", keys,
                          buffer_ptrs, lens=sizes, zero_copy=True,
                          finish=list)

    def _p_batch_get_into_multi_buffers(self, keys, all_buffer_ptrs,
                                        all_sizes,
                                        prefer_alloc_in_same_node=False):
        flat = self._flatten(keys, all_buffer_ptrs, all_sizes)
        if self._kv is None or flat is None:
            return _Done([INVALID_PARAMS] * len(keys))
        if not keys:
            return _Done([])
        ptrs, sizes, counts = flat
        return self._plan([INVALID_PARAMS] * len(keys), "get", keys, ptrs,
                          counts=counts, lens=sizes, zero_copy=True,
                          finish=list)

    def _p_get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets,
                           all_src_offsets, all_sizes):
        shape = [[[INVALID_PARAMS] * len(d) for d in dsts]
                 for dsts in all_dst_offsets]
        if self._kv is None or not len(buffer_ptrs) == len(all_keys) == \
                len(all_dst_offsets) == len(all_src_offsets) == \
                len(all_sizes):
            return _Done(shape)
        keys, srcs, ptrs, sizes, where = [], [], [], [], []
        for b, base in enumerate(buffer_ptrs):
            groups = (all_keys[b], all_dst_offsets[b], all_src_offsets[b],
                      all_sizes[b])
            if not len(groups[0]) == len(groups[1]) == len(groups[2]) == \
                    len(groups[3]):
                continue  # the buffer's ranges stay -600
            for j, (key, dst, src, size) in enumerate(zip(*groups)):
                if not len(dst) == len(src) == len(size):
                    continue
                for k in range(len(dst)):
                    keys.append(key)
                    srcs.append(src[k])
                    ptrs.append(base + dst[k])
                    sizes.append(size[k])
                    where.append((b, j, k))
        if not keys:
            return _Done(shape)

        def finish(results):
            for (b, j, k), r in zip(where, results):
                shape[b][j][k] = r
            return shape
        return self._plan(shape, "get", keys, ptrs, lens=sizes,
                          zero_copy=True, src_offsets=srcs, finish=finish)

    def _p_is_exist(self, key):
        return self._plan(INVALID_PARAMS, "exist", [key])

    def _p_batch_is_exist(self, keys):
        if not keys:
            return _Done([])
        return self._plan([INVALID_PARAMS] * len(keys), "exist", keys,
                          finish=list)

    def _p_get_size(self, key):
        return self._plan(INVALID_PARAMS, "size", [key])

    def _p_remove(self, key, force=False):
        return self._plan(INVALID_PARAMS, "remove", [key], force=force)

    def _p_batch_remove(self, keys, force=False):
        if not keys:
            return _Done([])
        return self._plan([INVALID_PARAMS] * len(keys), "remove", keys,
                          force=force, finish=list)

    def _p_remove_all(self, force=False):
        return self._plan(INVALID_PARAMS, "remove_all", force=force,
                          finish=int)

    # -- what programs call ------------------------------------------------
    def put(self, key, value, config=_DEFAULT_CONFIG):
        """Put ``value`` (any object with the buffer protocol) as ``key``,
        staged through the client's buffer. An existing key is a success
        that writes nothing (objects are immutable). Returns 0; -200 (no
        space, even after eviction); -600 (an empty value or key, a key
        over 4096 bytes, a config the store lacks); -800; -900."""
        return self._call(self._p_put(key, value, config))

    def put_parts(self, key, *parts, config=_DEFAULT_CONFIG):
        """Put the concatenation of ``parts`` (buffer objects) as one
        object; as put()."""
        return self._call(self._p_put_parts(key, *parts, config=config))

    def put_batch(self, keys, values, config=_DEFAULT_CONFIG):
        """Put ``values[i]`` as ``keys[i]``, one batch. Returns 0, or the
        first key's error (-600 for lists of different lengths)."""
        return self._call(self._p_put_batch(keys, values, config))

    def put_from(self, key, buffer_ptr, size, config=_DEFAULT_CONFIG):
        """Put ``size`` bytes at ``buffer_ptr``, registered memory
        (register_buffer), without staging. Returns as put(); 0 for
        ``size`` 0 (nothing is put, as Mooncake's)."""
        return self._call(self._p_put_from(key, buffer_ptr, size, config))

    def batch_put_from(self, keys, buffer_ptrs, sizes,
                       config=_DEFAULT_CONFIG):
        """put_from() of every key, one batch: a list of 0 / negative,
        all -600 for lists of different lengths."""
        return self._call(self._p_batch_put_from(keys, buffer_ptrs, sizes,
                                                 config))

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     config=_DEFAULT_CONFIG):
        """Put each key from several registered buffers, concatenated in
        order: a list of 0 / negative ([] before setup(), as Mooncake's)."""
        return self._call(self._p_batch_put_from_multi_buffers(
            keys, all_buffer_ptrs, all_sizes, config))

    def get(self, key):
        """The object's bytes; ``b""`` when it is missing or on any
        error. Leases it while it is read."""
        return self._call(self._p_get(key))

    def get_batch(self, keys):
        """get() of every key: a list of bytes (``b""`` for each one
        missing); ``[b""]`` for no key, as Mooncake's."""
        return self._call(self._p_get_batch(keys))

    def get_buffer(self, key):
        """The object in memory of its own, a BufferHandle (ptr(), size(),
        the buffer protocol), or None."""
        return self._call(self._p_get_buffer(key))

    def batch_get_buffer(self, keys):
        """get_buffer() of every key: BufferHandles, None for those
        missing."""
        return self._call(self._p_batch_get_buffer(keys))

    def get_into(self, key, buffer_ptr, size):
        """Read the object into ``size`` bytes at ``buffer_ptr``,
        registered memory, without staging. Returns its length; -704
        (missing), -600 (longer than ``size``), -707 (its lease ran out
        during the read: the bytes may be another object's), -800."""
        return self._call(self._p_get_into(key, buffer_ptr, size))

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        """get_into() of every key, one batch: a list of lengths /
        negative."""
        return self._call(self._p_batch_get_into(keys, buffer_ptrs, sizes))

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     prefer_alloc_in_same_node=False):
        """Read each key into several registered buffers in order (their
        lengths add up to its room): a list of lengths / negative."""
        return self._call(self._p_batch_get_into_multi_buffers(
            keys, all_buffer_ptrs, all_sizes, prefer_alloc_in_same_node))

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets,
                        all_src_offsets, all_sizes):
        """Read byte ranges of objects into registered buffers, zero-copy:
        for buffer b, its keys all_keys[b], and for key j its ranges k:
        all_sizes[b][j][k] bytes of the object from all_src_offsets[b][j]
        [k] on, to buffer_ptrs[b] + all_dst_offsets[b][j][k]. Returns the
        same nesting of bytes read / negative (-600 a range past the
        object's end, or lists whose lengths do not match)."""
        return self._call(self._p_get_into_ranges(
            buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
            all_sizes))

    def is_exist(self, key):
        """1 if a complete object ``key`` exists (it is then leased), 0 if
        not, negative on error."""
        return self._call(self._p_is_exist(key))

    def batch_is_exist(self, keys):
        """is_exist() of every key in one request: a list of 1 / 0 /
        negative."""
        return self._call(self._p_batch_is_exist(keys))

    def get_size(self, key):
        """The object's length in bytes (it is leased), or negative (-704
        missing)."""
        return self._call(self._p_get_size(key))

    def remove(self, key, force=False):
        """Remove the object: 0; -706 while leased unless ``force``; -704;
        -703 (its put has not ended)."""
        return self._call(self._p_remove(key, force))

    def batch_remove(self, keys, force=False):
        """remove() of every key: a list of 0 / negative."""
        return self._call(self._p_batch_remove(keys, force))

    def remove_all(self, force=False):
        """Remove every complete object not leased (leased ones too with
        ``force``): how many, or negative."""
        return self._call(self._p_remove_all(force))

    def upsert(self, key, value, config=_DEFAULT_CONFIG):
        """put() that replaces an object of the key: readers get the old
        value whole until the new one is whole, then the new one (a new
        version); a put or upsert of the key in progress is preempted.
        Returns 0 or as put() (never -705)."""
        return self._call(self._p_upsert(key, value, config))

    def upsert_parts(self, key, *parts, config=_DEFAULT_CONFIG):
        """put_parts() as an upsert."""
        return self._call(self._p_upsert_parts(key, *parts, config=config))

    def upsert_batch(self, keys, values, config=_DEFAULT_CONFIG):
        """put_batch() as upserts: 0 or the first error."""
        return self._call(self._p_upsert_batch(keys, values, config))

    def upsert_from(self, key, buffer_ptr, size, config=_DEFAULT_CONFIG):
        """put_from() as an upsert (registered memory, zero-copy)."""
        return self._call(self._p_upsert_from(key, buffer_ptr, size, config))

    def batch_upsert_from(self, keys, buffer_ptrs, sizes,
                          config=_DEFAULT_CONFIG):
        """batch_put_from() as upserts: a list of 0 / negative."""
        return self._call(self._p_batch_upsert_from(keys, buffer_ptrs,
                                                    sizes, config))

    def remove_by_regex(self, regex_pattern, force=False):
        """Remove every complete object whose key the pattern matches
        anywhere (POSIX extended; Mooncake's are ECMAScript), leased ones
        too with ``force``: how many, or negative (-600 a bad pattern)."""
        return self._call(self._p_remove_by_regex(regex_pattern, force))

    def get_versioned(self, key, buffer, min_version=0):
        """xfer's own: read ``key`` into ``buffer`` (a writable buffer
        object, staged) if its version is at least ``min_version`` (0:
        any). Returns ``(length or negative, version)``: the version read;
        with -720 (VERSION_TOO_OLD) the largest there, which was not read;
        0 when there is none. Every put that ends gets the next version of
        the master's one counter."""
        return self._call(self._p_get_versioned(key, buffer, min_version))

    def get_into_versioned(self, key, buffer_ptr, size, min_version=0):
        """get_versioned() into registered memory, zero-copy."""
        return self._call(self._p_get_into_versioned(key, buffer_ptr, size,
                                                     min_version))

    def get_replica_desc(self, key):
        """The object's complete replicas, a list of ReplicaDescriptor
        (``[]`` when missing or on error, as Mooncake's). Leases it."""
        return self._call(self._p_get_replica_desc(key))

    def batch_get_replica_desc(self, keys):
        """{key: [ReplicaDescriptor]} of the keys found."""
        return self._call(self._p_batch_get_replica_desc(keys))

    def batch_replica_clear(self, keys, segment_name=""):
        """Drop the keys' replicas in segment ``segment_name`` (every one,
        the object removed, when empty), of complete objects this client
        put and nobody holds a lease on: the list of keys cleared."""
        return self._call(self._p_batch_replica_clear(keys, segment_name))

    def sync(self):
        """xfer's own (the store design's Sync): the last version given,
        answered after every request the master took before; a get after
        it sees every put that ended before sync was called. Negative if
        the master cannot be reached."""
        return self._call(self._p_sync())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# The calls with an asynchronous twin (async_NAME) in
# MooncakeDistributedStoreAsync: those whose plan is _p_NAME.
CALLS = tuple(n[3:] for c in (MooncakeDistributedStore, TaskCalls)
              for n in vars(c) if n.startswith("_p_"))
