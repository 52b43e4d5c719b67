"""xfer.mooncake.store's upserts (Mooncake's upsert, upsert_parts,
upsert_batch, upsert_from, batch_upsert_from), remove_by_regex, and xfer's
own versions and sync, against a running xfer-stored: return codes,
bytes read back, the asyncio twins, and readers racing upserts of one
key seeing only whole values."""
import asyncio
import threading

import pytest

from conftest import MiB, Master, pattern
from xfer import address_of
from xfer.mooncake.async_store import MooncakeDistributedStoreAsync
from xfer.mooncake.store import (MooncakeDistributedStore, ReplicaStatus,
                                 ReplicateConfig)

VERSION_TOO_OLD = -720


@pytest.fixture
def master():
    m = Master("--default_kv_lease_ttl=1000")
    yield m
    m.stop()


@pytest.fixture
def make_store(master):
    stores = []

    def make(cls=MooncakeDistributedStore):
        s = cls()
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 64 * MiB, 16 * MiB,
                       "tcp", "", master.addr) == 0
        stores.append(s)
        return s
    yield make
    for s in stores:
        assert s.close() == 0


def read(store, key, min_version=0):
    n = store.get_size(key)
    assert n > 0
    buf = bytearray(n)
    r, v = store.get_versioned(key, buf, min_version)
    return r, bytes(buf[:max(r, 0)]), v


def test_upserts_and_versions(make_store):
    s = make_store()
    assert s.sync() == 0
    assert s.put("k", pattern(1, 5000)) == 0
    assert s.put("k", pattern(2, 5000)) == 0          # kept
    assert read(s, "k") == (5000, pattern(1, 5000), 1)
    assert s.upsert("k", pattern(3, 7000)) == 0        # replaced
    assert read(s, "k") == (7000, pattern(3, 7000), 2)
    assert s.upsert_parts("k", b"ab", memoryview(b"cd")) == 0
    assert s.get("k") == b"abcd"
    assert s.upsert_batch(["k", "j"], [b"x" * 10, b"y" * 20]) == 0
    assert s.get_batch(["k", "j"]) == [b"x" * 10, b"y" * 20]
    assert s.upsert_batch(["k"], []) == -600
    assert s.upsert("", b"v") == -600
    assert s.upsert("k", b"v", ReplicateConfig(replica_num=0)) == -600

    mem = bytearray(pattern(4, 3 * MiB))
    base, size = address_of(mem)
    assert s.register_buffer(base, size) == 0
    assert s.upsert_from("k", base, MiB) == 0
    assert s.batch_upsert_from(["k", "z"], [base, base + MiB],
                               [MiB, 2 * MiB]) == [0, 0]
    assert s.get("z") == bytes(mem[MiB:])
    assert s.batch_upsert_from(["k"], [base], []) == [-600]
    last = s.sync()
    assert last == 8
    into = bytearray(MiB)
    ib, isz = address_of(into)
    assert s.register_buffer(ib, isz) == 0
    assert s.get_into_versioned("k", ib, isz, last - 1) == (MiB, last - 1)
    assert bytes(into) == bytes(mem[:MiB])
    assert s.get_into_versioned("k", ib, isz, last) == (VERSION_TOO_OLD,
                                                        last - 1)
    assert s.get_versioned("none", bytearray(8)) == (-704, 0)
    assert s.get_versioned("k", bytearray(8)) == (-600, last - 1)
    assert s.unregister_buffer(ib) == 0
    assert s.unregister_buffer(base) == 0
    with pytest.raises(BufferError):
        s.get_versioned("k", b"read-only")


def test_remove_by_regex(make_store):
    s = make_store()
    for k in ("a/1", "a/2", "ab/1", "b/1"):
        assert s.put(k, b"v" * 100) == 0
    assert s.is_exist("a/2") == 1                      # leased
    assert s.remove_by_regex("^a/[0-9]+$") == 1
    assert s.remove_by_regex("^a/[0-9]+$", force=True) == 1
    assert s.batch_is_exist(["a/1", "a/2", "ab/1", "b/1"]) == [0, 0, 1, 1]
    assert s.remove_by_regex("(") == -600
    assert s.remove_by_regex("") == -600
    assert s.remove_by_regex("/1$", True) == 2
    assert s.batch_remove(["ab/1", "b/1"]) == [-704, -704]


def test_replica_desc(make_store):
    import ctypes
    a, b = make_store(), make_store()
    value = pattern(7, 9000)
    assert a.put("r", value, ReplicateConfig(replica_num=2)) == 0
    descs = a.get_replica_desc("r")
    assert len(descs) == 2
    ends = set()
    for d in descs:
        assert d.status == ReplicaStatus.COMPLETE
        assert d.is_memory_replica() and not d.is_disk_replica()
        bd = d.get_memory_descriptor().buffer_descriptor
        assert bd.size == 9000
        ends.add(bd.transport_endpoint)
        # both segments are in this process: the bytes are at the address
        assert ctypes.string_at(bd.buffer_address, bd.size) == value
    assert ends == {a.get_hostname(), b.get_hostname()}
    assert a.get_replica_desc("none") == []
    got = a.batch_get_replica_desc(["r", "none"])
    assert list(got) == ["r"] and len(got["r"]) == 2
    assert a.batch_get_replica_desc([]) == {}
    assert a.remove("r") == -706                        # leased
    assert a.put("c", value, ReplicateConfig(replica_num=2)) == 0
    assert a.put("f", value) == 0
    assert b.batch_replica_clear(["c"]) == []           # a's, not b's
    assert a.batch_replica_clear(["c", "r", "none"],
                                 b.get_hostname()) == ["c"]
    d = a.get_replica_desc("c")
    assert [x.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for x in d] == [a.get_hostname()]
    assert a.get("c") == value
    assert a.batch_replica_clear(["f"]) == ["f"]
    assert a.is_exist("f") == 0
    assert a.batch_replica_clear([]) == []


def test_get_into_ranges(make_store):
    s = make_store()
    a, b = pattern(11, 3 * MiB + 3), pattern(12, 5000)
    assert s.put("a", a) == 0 and s.put("b", b) == 0
    bufs = [bytearray(4 * MiB), bytearray(4096)]
    ptrs = []
    for m in bufs:
        base, size = address_of(m)
        assert s.register_buffer(base, size) == 0
        ptrs.append(base)
    got = s.get_into_ranges(
        ptrs, [["a", "b"], ["b", "none", "a"]],
        [[[0, MiB], [3 * MiB]], [[0], [100], [200, 300]]],
        [[[5, 2 * MiB], [4000]], [[4990], [0], [3 * MiB, 3 * MiB + 3]]],
        [[[1000, MiB + 3], [1000]], [[20], [10], [3, 1]]])
    assert got == [[[1000, MiB + 3], [1000]], [[-600], [-704], [3, -600]]]
    assert bytes(bufs[0][:1000]) == a[5:1005]
    assert bytes(bufs[0][MiB:2 * MiB + 3]) == a[2 * MiB:]
    assert bytes(bufs[0][3 * MiB:3 * MiB + 1000]) == b[4000:]
    assert bytes(bufs[1][200:203]) == a[3 * MiB:]
    # shapes that do not match: that buffer's ranges are -600
    assert s.get_into_ranges(ptrs[:1], [["a"]], [[[0]]], [[[0], [1]]],
                             [[[8]]]) == [[[-600]]]
    assert s.get_into_ranges(ptrs, [["a"]], [[[0]]], [[[0]]],
                             [[[8]]]) == [[[-600]]]
    for p in ptrs:
        assert s.unregister_buffer(p) == 0


def test_async_twins(make_store):
    s = make_store(MooncakeDistributedStoreAsync)

    async def run():
        assert await s.async_put("k", b"1" * 64) == 0
        assert await s.async_upsert("k", b"2" * 64) == 0
        buf = bytearray(64)
        assert await s.async_get_versioned("k", buf, 2) == (64, 2)
        assert bytes(buf) == b"2" * 64
        assert await s.async_sync() == 2
        descs = await s.async_get_replica_desc("k")
        assert [d.get_memory_descriptor().buffer_descriptor.size
                for d in descs] == [64]
        assert await s.async_upsert_batch(["k"], [b"3"]) == 0
        assert await s.async_remove_by_regex("^k$", True) == 1
        return await s.async_sync()
    async def bounded():  # a future never settled fails, not hangs
        return await asyncio.wait_for(run(), 30)
    assert asyncio.run(bounded()) == 3


def test_upsert_racing_readers(make_store):
    """A writer upserts one key 30 times; two readers in other clients
    read it all along: each read is one whole value, never older than the
    one before."""
    w, readers = make_store(), [make_store(), make_store()]
    n, size = 30, 2 * MiB + 5
    values = [pattern(100 + i, size) for i in range(n + 1)]
    index = {v[:64] + v[-64:]: i for i, v in enumerate(values)}
    assert w.put("hot", values[0]) == 0
    done = threading.Event()
    errors, counts = [], []

    def reader(s):
        last, reads = 0, 0
        while True:
            finished = done.is_set()
            v = s.get("hot")
            i = index.get(v[:64] + v[-64:])
            if i is None or v != values[i] or i < last:
                errors.append((len(v), i, last))
                return
            last, reads = i, reads + 1
            if finished:
                counts.append((reads, last))
                return

    threads = [threading.Thread(target=reader, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    for i in range(1, n + 1):
        assert w.upsert("hot", values[i]) == 0
    done.set()
    for t in threads:
        t.join(60)
    assert not errors
    assert [last for _, last in counts] == [n, n]
