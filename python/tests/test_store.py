"""xfer.mooncake.store against a running xfer-stored: every call of
Mooncake's MooncakeDistributedStore (docs/PYTHON.md's table) with its
return codes, between this process and another client process
(store_peer.py), every byte read back checked; replicas, leases, a full
store, the master gone; the GIL let go while a call waits; the asyncio
twins awaiting the client's callbacks."""
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import HERE, MiB, Master, digest, free_port, pattern
from xfer import address_of
from xfer.mooncake.async_store import MooncakeDistributedStoreAsync
from xfer.mooncake.store import (BufferHandle, MooncakeDistributedStore,
                                 ReplicateConfig, SoftPinAction, parse_size)

LEASE_MS = 1000


@pytest.fixture(scope="module")
def master():
    m = Master(f"--default_kv_lease_ttl={LEASE_MS}")
    yield m
    m.stop()


def set_up(store, master, seg=64 * MiB, buf=16 * MiB):
    return store.setup("127.0.0.1", "P2PHANDSHAKE", seg, buf, "tcp", "",
                       master.addr)


@pytest.fixture
def make_store(master):
    stores = []

    def make(cls=MooncakeDistributedStore, m=None, **kw):
        s = cls()
        assert set_up(s, m or master, **kw) == 0
        stores.append(s)
        return s
    yield make
    if stores and stores[0].health_check() == 0:
        stores[0].remove_all(True)
    for s in stores:
        assert s.close() == 0


class StorePeer:
    """store_peer.py: a client of the store in another process."""

    def __init__(self, master, seg=64 * MiB):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "store_peer.py"),
             master.addr, str(seg)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env=env)
        self.hostname = self._read()["hostname"]

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"store peer exited ({self.proc.poll()})")
        return json.loads(line)

    def cmd(self, op, **args):
        self.proc.stdin.write(json.dumps(dict(args, op=op)) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def call(self, method, *args):
        return self.cmd("call", method=method, args=list(args))["r"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.flush()
            assert self.proc.wait(timeout=30) == 0
        self.proc.stdin.close()
        self.proc.stdout.close()


@pytest.fixture
def peer(master):
    p = StorePeer(master)
    yield p
    if p.proc.poll() is None:
        p.close()


def test_before_setup_and_after_close(master):
    s = MooncakeDistributedStore()
    assert s.health_check() == 1
    assert s.get_hostname() == ""
    assert s.put("k", b"v") == -600
    assert s.put_from("k", 4096, 8) == -600
    assert s.get("k") == b""
    assert s.get_batch(["k"]) == [b""]
    assert s.get_buffer("k") is None
    assert s.get_into("k", 4096, 8) == -600
    assert s.batch_put_from(["k"], [4096], [8]) == [-600]
    assert s.batch_get_into(["k"], [4096], [8]) == [-600]
    assert s.batch_put_from_multi_buffers(["k"], [[4096]], [[8]]) == []
    assert s.is_exist("k") == -600
    assert s.batch_is_exist(["k", "j"]) == [-600, -600]
    assert s.get_size("k") == -600
    assert s.remove("k") == -600
    assert s.remove_all() == -600
    assert s.register_buffer(4096, 8) == -600
    assert s.close() == 0
    assert set_up(s, master) == 0
    assert s.health_check() == 0
    assert s.init_all("tcp", "") == -600  # set up already
    assert s.close() == 0
    assert s.health_check() == 1 and s.get("k") == b""


def test_setup_forms(master, make_store):
    a = make_store()
    assert re.fullmatch(r"127\.0\.0\.1:\d+", a.get_hostname())
    b = MooncakeDistributedStore()
    # Mooncake's dict form: every value a string (or made one)
    conf = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
            "global_segment_size": "50%", "local_buffer_size": "4kb",
            "protocol": "tcp", "rdma_devices": "",
            "master_server_addr": master.addr}
    assert b.setup(conf) == 0
    try:
        # staged through a 4 KiB buffer: in pieces, both ways
        data = pattern(1, 64 * 1024 + 1)
        assert b.put("setup-dict", data) == 0
        assert a.get("setup-dict") == data
        assert b.get("setup-dict") == data
        assert b.setup(config=dict(conf, global_segment_size=16 * MiB,
                                   local_buffer_size="1.5 MB")) == 0
        assert b.put("setup-int", data) == 0 and a.get("setup-int") == data
    finally:
        b.close()
    for bad in ({"local_buffer_size": "4 parsecs"},
                {"global_segment_size": "512"},       # under 1 KiB
                {"global_segment_size": "0%"},
                {"local_hostname": ""}, {"metadata_server": ""},
                {"tenant_id": "other"}, {"enable_ssd_offload": "true"}):
        assert b.setup(dict(conf, **bad)) == -600, bad
    assert b.health_check() == 1
    args = ("127.0.0.1", "P2PHANDSHAKE", MiB, MiB, "tcp", "")
    assert b.setup(*args, f"127.0.0.1:{free_port()}") == -900
    assert b.setup(*args, master.addr, engine=object()) == -600
    with pytest.raises(TypeError):
        b.setup("127.0.0.1", "P2PHANDSHAKE")


def test_parse_size():
    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert parse_size("4gb") == 4 << 30
    assert parse_size(" 4 GB ") == 4 << 30
    assert parse_size("1.5m") == 3 << 19
    assert parse_size("16") == 16 and parse_size("2tb") == 2 << 40
    assert parse_size("50%") == phys // 2
    for bad in ("", "gb", "4 parsecs", "0%", "101%", "-1", "4g4"):
        assert parse_size(bad) is None, bad


def test_put_get_between_processes(make_store, peer):
    me = make_store()
    for n in (1, 4096, 64 * 1024 + 1, 20 * MiB + 3):  # > the 16 MiB buffer
        # its bytes in the peer's segment, read from here; and back
        r = peer.cmd("put", key=f"pp-{n}", seed=n, len=n,
                     preferred=peer.hostname)
        assert r["r"] == 0
        assert me.get(f"pp-{n}") == pattern(n, n)
        assert me.get_size(f"pp-{n}") == n
        cfg = ReplicateConfig(preferred_segment=me.get_hostname())
        assert me.put(f"mine-{n}", bytearray(pattern(n + 1, n)), cfg) == 0
        assert peer.cmd("get", key=f"mine-{n}") == {
            "len": n, "digest": digest(pattern(n + 1, n))}
    # immutable: a second put of a key succeeds and writes nothing
    assert me.put("pp-1", b"other") == 0
    assert me.get("pp-1") == pattern(1, 1)
    assert me.put_parts("parts", b"he", memoryview(b"ll"),
                        bytearray(b"o")) == 0
    assert peer.call("get_size", "parts") == 5 and me.get("parts") == b"hello"
    keys = [f"batch-{i}" for i in range(40)]
    vals = [pattern(i, 100 + i) for i in range(40)]
    assert me.put_batch(keys, vals) == 0
    assert me.get_batch(keys + ["missing"]) == vals + [b""]
    assert me.get_batch([]) == [b""]
    assert me.put_batch(keys, vals[:-1]) == -600
    assert me.put_batch(["", "ok-key"], [b"x", b"y"]) == -600
    assert me.is_exist("batch-0") == 1 and me.is_exist("missing") == 0
    assert peer.call("batch_is_exist", ["batch-1", "missing"]) == [1, 0]
    h = me.get_buffer("parts")
    assert isinstance(h, BufferHandle) and h.size() == len(h) == 5
    assert bytes(h) == b"hello" and memoryview(h).nbytes == 5
    assert h.ptr() != 0
    assert [bytes(x) if x else x for x in
            me.batch_get_buffer(["parts", "missing"])] == [b"hello", None]
    # misses and bad arguments: Mooncake's codes, no exception
    assert me.get("missing") == b"" and me.get_size("missing") == -704
    assert me.remove("missing") == -704
    assert me.put("empty", b"") == -600
    assert me.put("k" * 5000, b"v") == -600 and me.get("") == b""
    with pytest.raises(TypeError):
        me.put("str", "not a buffer")


def test_mount_segment(make_store, peer, tmp_path):
    """A file mapped by mount_segment() (Mooncake's form) holds the
    objects put there (a store with no segment of its own prefers its
    name); a peer reads them; unmount_segment() drops them; memory of
    allocate_and_mount_segment() serves as well."""
    me = make_store(seg=0)
    path = tmp_path / "lent"
    with open(path, "wb") as f:
        f.truncate(8 * MiB)
    r = me.mount_segment(str(path), 4 * MiB)
    assert r["ret"] == 0 and len(r["segment_ids"]) == 1
    sid = r["segment_ids"][0]
    assert me.mount_segment(str(path), MiB, offset=100)["ret"] == -1
    assert me.mount_segment(str(path), 16 * MiB)["ret"] == -1  # past end
    assert me.mount_segment(str(tmp_path / "none"), MiB)["ret"] == -1
    assert me.mount_segment(str(path), 100, offset=4 * MiB)["ret"] == -600
    cfg = ReplicateConfig(replica_num=1,
                          preferred_segment=me.get_hostname())
    value = pattern(21, MiB + 3)
    assert me.put("ms-a", value, cfg) == 0
    lent = path.read_bytes()[:4 * MiB]          # the file holds it
    assert lent.find(value) >= 0
    assert peer.cmd("get", key="ms-a")["digest"] == digest(value)
    assert peer.cmd("put", key="ms-b", seed=22, len=5000,
                    preferred=me.get_hostname())["r"] == 0
    assert path.read_bytes()[:4 * MiB].find(pattern(22, 5000)) >= 0
    assert me.unmount_segment(["no-such-id"]) == -1
    assert me.unmount_segment([sid]) == 0
    assert me.unmount_segment([sid]) == -1
    assert me.is_exist("ms-a") == 0 and me.get_size("ms-b") == -704
    assert peer.cmd("get", key="ms-a")["len"] == 0
    a = me.allocate_and_mount_segment(MiB)
    assert a["ret"] == 0 and a["allocated_size"] == 4 * MiB
    assert me.allocate_and_mount_segment(0)["ret"] == -1
    assert me.put("ms-c", value, cfg) == 0 and me.get("ms-c") == value
    assert me.unmount_and_free_segment(a["segment_ids"]) == 0
    assert me.is_exist("ms-c") == 0
    # a later unmount of one still lent, after its grace period
    r = me.allocate_and_mount_segment(MiB)
    assert me.unmount_segment(r["segment_ids"], 1) == 0


def test_zero_copy(make_store, peer):
    me = make_store()
    mem = bytearray(4 * MiB)
    base, size = address_of(mem)
    assert me.register_buffer(base, size) == 0
    assert me.register_buffer(base + 4096, 4096) == -600  # overlaps
    assert peer.cmd("put_from", key="zc-peer", seed=7, len=MiB + 1)["r"] == 0
    assert me.get_into("zc-peer", base, MiB + 1) == MiB + 1
    assert mem[:MiB + 1] == pattern(7, MiB + 1)
    assert me.get_into("zc-peer", base, MiB) == -600      # too small
    assert me.get_into("missing", base, MiB) == -704
    mem[:3 * MiB] = pattern(8, 3 * MiB)
    assert me.put_from("zc-1", base, MiB) == 0
    assert me.put_from("zc-0", base, 0) == 0 and me.is_exist("zc-0") == 0
    keys = [f"zc-b{i}" for i in range(16)]
    offs = [i * 4096 for i in range(16)]
    assert me.batch_put_from(keys, [base + o for o in offs],
                             [4096] * 16) == [0] * 16
    assert me.batch_put_from(keys, [base], [1, 2]) == [-600] * 16
    for k, o in zip(keys, offs):
        assert peer.cmd("get", key=k)["digest"] == digest(mem[o:o + 4096])
    dst = 3 * MiB
    got = me.batch_get_into(keys + ["missing"],
                            [base + dst + o for o in offs] + [base],
                            [4096] * 17)
    assert got == [4096] * 16 + [-704]
    assert mem[dst:dst + 16 * 4096] == mem[:16 * 4096]
    # one object from three buffers, and back into two
    assert me.batch_put_from_multi_buffers(
        ["zc-multi"], [[base, base + MiB, base + 2 * MiB]],
        [[10, 20, 30]]) == [0]
    want = bytes(mem[:10] + mem[MiB:MiB + 20] + mem[2 * MiB:2 * MiB + 30])
    assert peer.cmd("get", key="zc-multi")["digest"] == digest(want)
    assert me.batch_get_into_multi_buffers(
        ["zc-multi"], [[base + dst, base + dst + 4096]], [[25, 35]]) == [60]
    assert bytes(mem[dst:dst + 25] + mem[dst + 4096:dst + 4096 + 35]) == want
    assert me.batch_put_from_multi_buffers(["a", "b"], [[base]],
                                           [[1]]) == [-600, -600]
    assert me.unregister_buffer(base) == 0
    assert me.unregister_buffer(base) == -600


def test_replicas_survive_a_holder(make_store, make_master):
    m = make_master()  # its dead client's segment stays until --client_ttl
    me = make_store(m=m)
    other = StorePeer(m)
    try:
        there = ReplicateConfig(preferred_segments=[other.hostname])
        two = ReplicateConfig(replica_num=2, preferred_segment=other.hostname)
        assert me.put("only-there", pattern(3, 8192), there) == 0
        assert me.put("twice", pattern(4, 8192), two) == 0
        assert me.get("only-there") == pattern(3, 8192)
    finally:
        other.proc.kill()
        other.proc.wait()
        other.proc.stdin.close()
        other.proc.stdout.close()
    # the first replica's holder is gone: the second one is read
    assert me.get("twice") == pattern(4, 8192)
    assert me.get("only-there") == b""
    with pytest.raises(TypeError):
        ReplicateConfig(replicas=2)
    assert me.put("sixteen+", b"x", ReplicateConfig(replica_num=17)) == -600
    # no client lent an SSD segment: the DRAM replica only (here: the
    # dead peer's segment stays mounted, and a write to it fails), or none
    assert me.put("nof", b"x", ReplicateConfig(
        nof_replica_num=1, preferred_segment=me.get_hostname())) == 0
    assert me.put("nof0", b"x", ReplicateConfig(replica_num=0,
                                                nof_replica_num=1)) == -200
    assert me.put("none", b"x", ReplicateConfig(replica_num=0)) == -600
    # (the dead peer's segment stays mounted until --client_ttl: not there)
    pinned = ReplicateConfig(soft_pin_action=SoftPinAction.ENABLE,
                             with_hard_pin=True,
                             preferred_segment=me.get_hostname())
    assert pinned.with_soft_pin and "ENABLE" in str(pinned)
    assert me.put("pinned", b"x", pinned) == 0


def test_leases_and_remove(make_store, peer):
    me = make_store()
    for k in ("l1", "l2", "l3"):
        assert me.put(k, k.encode()) == 0
    assert peer.call("is_exist", "l1") == 1          # leases it
    assert me.remove("l1") == -706
    assert me.remove("l1", True) == 0 and me.is_exist("l1") == 0
    assert me.get_size("l2") == 2                    # leases it
    assert me.batch_remove(["l2", "l3", "nope"]) == [-706, 0, -704]
    time.sleep(LEASE_MS / 1000 + 0.3)
    assert me.remove("l2") == 0
    for k in ("r1", "r2", "r3"):
        assert me.put(k, b"v") == 0
    assert me.is_exist("r1") == 1
    assert me.remove_all() == 2                      # not the leased one
    assert me.remove_all(force=True) == 1
    assert me.batch_is_exist(["r1", "r2"]) == [0, 0]


def test_full_store(make_master):
    m = make_master()
    s = MooncakeDistributedStore()
    assert set_up(s, m, seg=MiB, buf=MiB) == 0
    try:
        chunk = 256 * 1024
        hard = ReplicateConfig(with_hard_pin=True)
        codes = [s.put(f"hard-{i}", pattern(i, chunk), hard)
                 for i in range(6)]
        assert 0 in codes and codes[-1] == -200, codes
        assert s.remove(f"hard-{codes.index(0)}", True) == 0
        assert s.put("after", pattern(9, chunk), hard) == 0
        assert s.get("after") == pattern(9, chunk)
        assert s.remove_all(True) > 0
        # objects not pinned are evicted to make room
        for i in range(12):
            assert s.put(f"evict-{i}", pattern(i, chunk)) == 0
        assert s.get("evict-11") == pattern(11, chunk)
    finally:
        s.close()


def test_master_gone_and_back(make_master):
    m = make_master()
    s = MooncakeDistributedStore()
    assert set_up(s, m) == 0
    try:
        assert s.put("gone", b"v") == 0
        m.kill()
        for _ in range(50):
            if s.health_check() == 2:
                break
            time.sleep(0.1)
        assert s.health_check() == 2
        assert s.is_exist("gone") == -900
        assert s.put("gone-2", b"v") == -900 and s.get("gone") == b""
        back = Master(port=m.port)  # a new, empty master: we mount again
        try:
            for _ in range(50):
                if s.health_check() == 0:
                    break
                time.sleep(0.1)
            assert s.health_check() == 0
            assert s.put("back", b"again") == 0 and s.get("back") == b"again"
        finally:
            back.stop()
    finally:
        s.close()


def test_gil_let_go_while_waiting(make_master):
    m = make_master()
    s = MooncakeDistributedStore()
    assert set_up(s, m) == 0
    assert s.put("gil", b"v") == 0
    result = []
    m.proc.send_signal(signal.SIGSTOP)  # the call waits for its reply
    try:
        t = threading.Thread(target=lambda: result.append(s.is_exist("gil")))
        t.start()
        time.sleep(0.1)
        spins, end = 0, time.monotonic() + 0.3
        while time.monotonic() < end:
            spins += 1
        assert t.is_alive() and not result and spins > 1000
    finally:
        m.proc.send_signal(signal.SIGCONT)
    t.join(15)
    assert result == [1]
    s.close()


def test_threads_share_a_store(make_store, peer):
    me = make_store()
    errors = []

    def work(t):
        for i in range(30):
            k, v = f"t{t}-{i}", pattern(t * 100 + i, 1000 + i)
            if me.put(k, v) != 0 or me.get(k) != v:
                errors.append(k)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert peer.cmd("get", key="t3-29")["digest"] == digest(
        pattern(329, 1029))


def test_close_waits_for_calls_in_flight(make_master):
    m = make_master()
    s = MooncakeDistributedStore()
    assert set_up(s, m) == 0
    result = []
    m.proc.send_signal(signal.SIGSTOP)
    t = threading.Thread(target=lambda: result.append(s.get_size("x")))
    t.start()
    time.sleep(0.1)
    threading.Timer(0.3, m.proc.send_signal, (signal.SIGCONT,)).start()
    assert s.close() == 0          # waits for that call, then frees
    t.join(15)
    assert result == [-704]
    assert s.get_size("x") == -600 and s.health_check() == 1


def test_asyncio_twins(make_store, peer):
    me = make_store(MooncakeDistributedStoreAsync)
    mem = bytearray(MiB)
    base, size = address_of(mem)
    assert me.register_buffer(base, size) == 0

    async def main():
        loop = asyncio.get_running_loop()
        keys = [f"aio-{i}" for i in range(64)]
        vals = [pattern(i, 1000 + i) for i in range(64)]
        codes = await asyncio.gather(*(me.async_put(k, v)
                                       for k, v in zip(keys, vals)))
        assert codes == [0] * 64
        assert await asyncio.gather(*map(me.async_get, keys)) == vals
        assert await me.async_get("missing") == b""
        assert await me.async_get_batch(keys[:3]) == vals[:3]
        assert await me.async_put_parts("aio-p", b"a", b"b") == 0
        assert await me.async_put_batch(["aio-q"], [b"q"]) == 0
        assert await me.async_is_exist("aio-p") == 1
        assert await me.async_batch_is_exist(["aio-q", "no"]) == [1, 0]
        assert await me.async_get_size("aio-0") == 1000
        h = await me.async_get_buffer("aio-1")
        assert bytes(h) == vals[1]
        assert [bytes(x) for x in await me.async_batch_get_buffer(
            ["aio-1"])] == [vals[1]]
        mem[:4096] = pattern(5, 4096)
        assert await me.async_put_from("aio-z", base, 4096) == 0
        assert await me.async_batch_put_from(["aio-z2"], [base],
                                             [100]) == [0]
        assert await me.async_get_into("aio-z", base + 8192, 4096) == 4096
        assert await me.async_batch_get_into(
            ["aio-z2"], [base + 16384], [100]) == [100]
        assert mem[8192:12288] == mem[:4096]
        assert mem[16384:16484] == mem[:100]
        assert await me.async_batch_put_from_multi_buffers(
            ["aio-m"], [[base, base + 10]], [[5, 5]]) == [0]
        assert await me.async_batch_get_into_multi_buffers(
            ["aio-m"], [[base + 20000]], [[10]]) == [10]
        assert await me.async_remove("aio-q", True) == 0
        assert await me.async_batch_remove(["aio-p"], True) == [0]
        # a cancelled await abandons its result; the store goes on
        task = asyncio.ensure_future(me.async_get("aio-2"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await me.async_get("aio-2") == vals[2]
        # no thread pool: the loop's default executor was never made
        assert loop._default_executor is None
        assert await me.async_health_check() == 0   # this one uses it
        assert loop._default_executor is not None
        return await me.async_remove_all(True)

    removed = asyncio.run(main())
    assert removed >= 64
    assert peer.cmd("get", key="aio-0")["len"] == 0
    assert me.unregister_buffer(base) == 0


def test_asyncio_close_settles_calls_in_flight(make_master):
    m = make_master()

    async def main():
        s = MooncakeDistributedStoreAsync()
        assert await s.async_setup("127.0.0.1", "P2PHANDSHAKE", MiB, MiB,
                                   "tcp", "", m.addr) == 0
        m.proc.send_signal(signal.SIGSTOP)
        pending = asyncio.ensure_future(s.async_is_exist("x"))
        await asyncio.sleep(0.1)
        asyncio.get_running_loop().call_later(
            0.3, m.proc.send_signal, signal.SIGCONT)
        assert await s.async_close() == 0
        assert await asyncio.wait_for(pending, 5) == 0
        assert await s.async_get("x") == b""
    asyncio.run(main())


class _BadIndex:
    def __index__(self):
        raise ZeroDivisionError("hostile __index__")


class _BadSeq:
    def __len__(self):
        return 1 << 62

    def __getitem__(self, i):
        raise ZeroDivisionError("hostile __getitem__")


class _BadFuture:
    def done(self):
        return False

    def set_result(self, v):
        raise ZeroDivisionError("hostile set_result()")

    set_exception = set_result


def test_hostile_arguments(master):
    """Every argument of every call of the client underneath replaced by
    hostile values: each call returns or raises a clean exception, never
    SystemError, and the process lives on."""
    from xfer import _xfer
    kv = _xfer._KV({"bind_addr": "127.0.0.1"}, master.addr, MiB, MiB)
    mem = bytearray(4096)
    base = address_of(mem)[0]
    hostile = [None, 1.5, "x", "", "a\0b", b"ab", bytearray(8),
               memoryview(b"ro"), memoryview(bytearray(64))[::2], [], (),
               [1, 2], [[1]], [-1], [2**64], {}, object(), _BadIndex(),
               _BadSeq(), -1, 2**64, 2**100, [_BadIndex()], ["k", 3],
               _BadFuture()]
    valid = {
        "put": (["h1"], [b"value"], None, None, (1, False, False, None),
                False),
        "get": (["h1"], [bytearray(16)], None, None, False),
        "fetch": (["h1"], True), "exist": (["h1"],), "size": (["h1"],),
        "remove": (["h1"], False), "remove_all": (False,),
    }
    calls = 0
    try:
        for name, args in valid.items():
            for i in range(len(args) + 1):
                for bad in hostile:
                    a = list(args) + [None]  # the last: future=
                    a[i] = bad
                    calls += 1
                    try:
                        getattr(kv, name)(*a)
                    except SystemError:
                        raise
                    except (TypeError, ValueError, OverflowError,
                            BufferError, ZeroDivisionError, MemoryError,
                            AttributeError, UnicodeError):
                        pass
        for args in ((base,), (base, 4096, 1), ("x", 1), (_BadIndex(), 1),
                     (base, -1)):
            with pytest.raises((TypeError, OverflowError, ZeroDivisionError)):
                kv.register_buffer(*args)
        for cfg, addr in (({1: 2}, master.addr), ({"no_such": 1}, master.addr),
                          (None, "a\0b"), (None, "x" * 5000), ([], "")):
            with pytest.raises((TypeError, ValueError, OSError)):
                _xfer._KV(cfg, addr, MiB, MiB)
        kv._aio_drain()  # what the hostile futures were given
        assert kv.exist(["h1"]) in ([0], [1])
    finally:
        kv.close()
    assert calls > 500


def test_ssd_segment(make_store):
    """A file lent as an SSD segment (xfer's mount_file): an object put
    with an SSD replica only is read back by another client."""
    path = f"/dev/shm/xfer-test-ssd-{os.getpid()}"
    with open(path, "wb") as f:
        f.truncate(16 * MiB)
    try:
        assert MooncakeDistributedStore().mount_file(path) == -600
        owner = make_store()
        assert owner.mount_file(path + "-missing") == -600
        assert owner.mount_file(path) == 0
        assert owner.mount_file(path) == -600      # one per store
        reader = make_store()
        value = pattern(9, MiB + 3)
        ssd_only = ReplicateConfig(replica_num=0, nof_replica_num=1)
        assert owner.put("ssd-only", value, ssd_only) == 0
        assert reader.get("ssd-only") == value
        assert owner.get("ssd-only") == value
    finally:
        os.unlink(path)
