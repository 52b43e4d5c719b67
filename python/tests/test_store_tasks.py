"""xfer.mooncake.store's replication tasks (xfer's replicate, Mooncake's
create_copy_task, create_move_task, query_task, TaskType, TaskStatus,
QueryTaskResponse) against a running
xfer-stored with three stores that lend DRAM: replicas raised and
lowered, each holder's bytes read back, the states a task goes through,
the asyncio twins, and bad input."""
import asyncio
import time

import pytest

from conftest import MiB, Master, pattern
from xfer.mooncake.async_store import MooncakeDistributedStoreAsync
from xfer.mooncake.store import (MooncakeDistributedStore,
                                 QueryTaskResponse, TaskStatus, TaskType)


@pytest.fixture
def master():
    m = Master("--default_kv_lease_ttl=200")
    yield m
    m.stop()


@pytest.fixture
def make_store(master):
    stores = []

    def make(cls=MooncakeDistributedStore):
        s = cls()
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 8 * MiB, 4 * MiB,
                       "tcp", "", master.addr) == 0
        stores.append(s)
        return s
    yield make
    for s in stores:
        assert s.close() == 0


def wait(store, tid, timeout=20):
    end = time.monotonic() + timeout
    while True:
        r, err = store.query_task(tid)
        assert err == 0
        if r.status in (TaskStatus.SUCCESS, TaskStatus.FAILED) or \
                time.monotonic() > end:
            return r
        time.sleep(0.02)


def test_replicate_up_and_down(make_store):
    stores = [make_store() for _ in range(3)]
    a = stores[0]
    value = pattern(7, MiB + 5)
    assert a.put("k", value) == 0
    assert len(a.get_replica_desc("k")) == 1
    tid, err = a.replicate("k", 3)
    assert err == 0 and tid[0] == 0 and tid[1] > 0
    r, err = a.query_task(tid)
    assert err == 0 and isinstance(r, QueryTaskResponse)
    assert r.id == tid and r.type == TaskType.REPLICATE
    assert r.status in (TaskStatus.PENDING, TaskStatus.PROCESSING)
    r = wait(a, tid)
    assert r.status == TaskStatus.SUCCESS, r
    assert r.message == "Task completed successfully"
    assert r.assigned_client != (0, 0)
    assert r.last_updated_at_ms_epoch >= r.created_at_ms_epoch > 0
    descs = a.get_replica_desc("k")
    assert len(descs) == 3
    assert len({d.get_memory_descriptor().buffer_descriptor
                .transport_endpoint for d in descs}) == 3
    for s in stores:                 # each reads its own replica first
        assert s.get("k") == value
    time.sleep(0.25)                 # the lease of the queries above
    tid, err = a.replicate("k", 1)
    assert err == 0
    assert wait(a, tid).status == TaskStatus.SUCCESS
    assert len(a.get_replica_desc("k")) == 1
    assert stores[2].get("k") == value


def test_copy_and_move(make_store):
    stores = [make_store() for _ in range(3)]
    a = stores[0]
    value = pattern(5, 300000)
    assert a.put("k", value) == 0
    # the segments' names (the descriptors' endpoints), learnt from a
    # replicate to all three
    tid, err = a.replicate("k", 3)
    assert err == 0 and wait(a, tid).status == TaskStatus.SUCCESS
    names = [d.get_memory_descriptor().buffer_descriptor.transport_endpoint
             for d in a.get_replica_desc("k")]
    assert len(set(names)) == 3
    time.sleep(0.25)
    tid, err = a.replicate("k", 1)
    assert wait(a, tid).status == TaskStatus.SUCCESS
    holder = a.get_replica_desc("k")[0].get_memory_descriptor() \
        .buffer_descriptor.transport_endpoint
    rest = [n for n in names if n != holder]
    tid, err = a.create_copy_task("k", rest)
    assert err == 0
    r = wait(a, tid)
    assert r.status == TaskStatus.SUCCESS and \
        r.type == TaskType.REPLICA_COPY
    assert len(a.get_replica_desc("k")) == 3
    time.sleep(0.25)
    tid, err = a.replicate("k", 1)
    assert wait(a, tid).status == TaskStatus.SUCCESS
    time.sleep(0.25)
    tid, err = a.create_move_task("k", holder, rest[0])
    assert err == 0
    r = wait(a, tid)
    assert r.status == TaskStatus.SUCCESS and \
        r.type == TaskType.REPLICA_MOVE
    d = a.get_replica_desc("k")
    assert [x.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for x in d] == [rest[0]]
    for s in stores:
        assert s.get("k") == value
    assert a.create_move_task("k", holder, rest[1]) == ((0, 0), -600)
    assert a.create_move_task("k", "", rest[1]) == ((0, 0), -600)
    assert a.create_copy_task("k", ["nowhere"]) == ((0, 0), -101)
    assert a.create_copy_task("k", []) == ((0, 0), -600)
    assert a.create_copy_task("k", [""]) == ((0, 0), -600)
    assert a.create_copy_task("nope", [rest[1]]) == ((0, 0), -704)


def test_bad_input(make_store):
    s = make_store()
    assert s.replicate("nope", 2) == ((0, 0), -704)
    assert s.put("k", b"v" * 100) == 0
    assert s.replicate("k", 0) == ((0, 0), -600)
    assert s.replicate("k", 17) == ((0, 0), -600)
    assert s.replicate("k", -1) == ((0, 0), -600)
    assert s.replicate("k", 9, 8) == ((0, 0), -600)
    assert s.query_task((0, 12345)) == (None, -1400)
    assert s.query_task(12345) == (None, -1400)
    with pytest.raises(TypeError):
        s.query_task("x")
    # an SSD replica with no SSD segment anywhere: the task fails
    tid, err = s.replicate("k", 1, 1)
    assert err == 0
    r = wait(s, tid)
    assert r.status == TaskStatus.FAILED and r.message


def test_asyncio(make_store):
    stores = [make_store(MooncakeDistributedStoreAsync) for _ in range(2)]
    a = stores[0]
    value = pattern(3, 200000)

    async def run():
        assert await a.async_put("k", value) == 0
        tid, err = await a.async_replicate("k", 2)
        assert err == 0
        for _ in range(1000):
            r, err = await a.async_query_task(tid)
            assert err == 0
            if r.status == TaskStatus.SUCCESS:
                return r
            await asyncio.sleep(0.02)
        return r
    assert asyncio.run(run()).status == TaskStatus.SUCCESS
    descs = a.get_replica_desc("k")
    assert len(descs) == 2
    assert stores[1].get("k") == value

    async def copy_and_move():
        names = [d.get_memory_descriptor().buffer_descriptor
                 .transport_endpoint for d in descs]
        made = await a.async_create_copy_task("k", names)
        moved = await a.async_create_move_task("k", names[0], names[0])
        return made, moved
    made, moved = asyncio.run(copy_and_move())
    assert made[1] == 0 and made[0][1] > 0     # both hold it: a no-op
    assert moved == ((0, 0), -600)             # into its own source
    r, err = a.query_task(made[0])
    assert err == 0 and r.type == TaskType.REPLICA_COPY
