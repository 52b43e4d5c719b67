"""xfer.mooncake.TransferEngine between two processes (P2P handshake, TCP):
every method of Mooncake's binding, every byte checked, and its errors as
Mooncake returns them."""
import pytest

import xfer
from conftest import MiB, SIZES, Peer, digest, pattern
from xfer.mooncake import TransferEngine, TransferNotify, TransferOpcode

LOCAL = 40 * MiB


@pytest.fixture(scope="module")
def peer():
    p = Peer("mooncake", 40 * MiB)
    yield p
    p.close()


@pytest.fixture(scope="module")
def te():
    t = TransferEngine()
    assert t.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    yield t
    t._close()


@pytest.fixture(scope="module")
def local(te):
    addr = te.allocate_managed_buffer(LOCAL)
    assert addr
    yield addr
    assert te.free_managed_buffer(addr, LOCAL) == 0


def put(te, addr, data):
    assert te.write_bytes_to_buffer(addr, data, len(data)) == 0


def test_module_as_mooncake():
    """mooncake.engine's names, with xfer's truth: every SUPPORT_* flag
    (none of those builds), the enum's exported values, __all__ naming
    every public name so that import * keeps them."""
    import xfer.mooncake as mc
    flags = ["SUPPORT_CUDA", "SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_MNNVL",
             "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK"]
    assert all(getattr(mc, f) is False for f in flags)
    assert mc.Read == TransferOpcode.Read == 0
    assert mc.Write == TransferOpcode.Write == 1
    public = {n for n, v in vars(mc).items() if not n.startswith("_") and
              getattr(v, "__module__", mc.__name__) == mc.__name__ and
              not isinstance(v, type(mc))}
    public |= {"InnerTransferEngine"}
    assert set(mc.__all__) == public
    scope = {}
    exec("from xfer.mooncake import *", scope)
    assert set(flags) <= set(scope)
    assert TransferNotify().name == "" and TransferNotify("a", "b").msg == "b"


def test_get_engine(te):
    assert te.get_engine() is te.engine
    assert isinstance(te.get_engine(), xfer.Engine)
    import xfer.mooncake as mc
    assert isinstance(te.get_engine(), mc.InnerTransferEngine)
    assert TransferEngine().get_engine() is None


def test_get_local_topology(te):
    """No RDMA device here: "{}", as Mooncake's when it has no topology
    (rdma_lo.py checks a real matrix over rxe0)."""
    import json
    import os
    if os.path.isdir("/sys/class/infiniband") and \
            os.listdir("/sys/class/infiniband"):
        topo = json.loads(te.get_local_topology())
        assert all(len(row) == 2 for row in topo.values())
    else:
        assert te.get_local_topology() == "{}"
        assert te.get_local_topology("mlx5_0") == "{}"


def test_initialize_and_port(te, peer):
    port = te.get_rpc_port()
    assert 0 < port < 65536
    assert te.engine.name == f"127.0.0.1:{port}"
    assert peer.name.startswith("127.0.0.1:")
    other = TransferEngine()
    assert other.get_rpc_port() == -1
    assert other.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "",
                                "etcd") == 0
    assert other.get_rpc_port() > 0
    assert other.get_engine_ptr() != 0
    # a protocol xfer lacks, as Mooncake: -1
    assert other.initialize("127.0.0.1", "P2PHANDSHAKE", "nvlink", "") == -1
    other._close()


@pytest.mark.parametrize("size", SIZES)
def test_transfer_sync_write_read(te, local, peer, size):
    seed = size
    put(te, local, pattern(seed, size))
    assert te.transfer_sync_write(peer.name, local, peer.addr + 3, size) == 0
    peer.check(seed, 3, size)

    peer.fill(seed + 1, 5, size)
    assert te.transfer_sync_read(peer.name, local + 7, peer.addr + 5,
                                 size) == 0
    assert te.read_bytes_from_buffer(local + 7, size) == pattern(seed + 1,
                                                                 size)


@pytest.mark.parametrize("size", SIZES)
def test_transfer_sync_opcode(te, local, peer, size):
    put(te, local, pattern(11, size))
    assert te.transfer_sync(peer.name, local, peer.addr, size,
                            TransferOpcode.Write) == 0
    peer.check(11, 0, size)
    peer.fill(12, 0, size)
    assert te.transfer_sync(peer.name, local, peer.addr, size,
                            TransferEngine.TransferOpcode.Read) == 0
    assert te.read_bytes_from_buffer(local, size) == pattern(12, size)


def batch_layout(n=1000, base=4096):
    """n requests of 1 to 8 KiB covering [0, total) locally, placed in
    reverse order remotely: (local offsets, remote offsets, lengths)."""
    lengths = [1 + (i * 7919) % 8192 for i in range(n)]
    offs, at = [], 0
    for ln in lengths:
        offs.append(at)
        at += ln
    total = at
    remote = [base + total - o - ln for o, ln in zip(offs, lengths)]
    return offs, remote, lengths, total


def gather_remote(data, offs, lengths, total):
    """The remote image of local data under batch_layout()."""
    out = bytearray(total)
    for o, ln in zip(offs, lengths):
        r = total - o - ln
        out[r:r + ln] = data[o:o + ln]
    return bytes(out)


def test_batch_1000_sync(te, local, peer):
    offs, remote, lengths, total = batch_layout()
    data = pattern(21, total)
    put(te, local, data)
    assert te.batch_transfer_sync_write(
        peer.name, [local + o for o in offs],
        [peer.addr + r for r in remote], lengths) == 0
    image = gather_remote(data, offs, lengths, total)
    assert peer.digest(4096, total) == digest(image)

    put(te, local, bytes(total))
    assert te.batch_transfer_sync_read(
        peer.name, [local + o for o in offs],
        [peer.addr + r for r in remote], lengths) == 0
    assert te.read_bytes_from_buffer(local, total) == data


def test_batch_transfer_sync_opcode_and_notify(te, local, peer):
    put(te, local, pattern(31, 3 * MiB))
    addrs = [local, local + MiB, local + 2 * MiB]
    assert te.batch_transfer_sync(peer.name, addrs,
                                  [peer.addr + a - local for a in addrs],
                                  [MiB] * 3, TransferOpcode.Write,
                                  TransferNotify("batch", "done")) == 0
    peer.check(31, 0, 3 * MiB)
    assert peer.call("notifies")["notifies"] == [["batch", "done"]]
    assert te.batch_transfer_sync(peer.name, addrs,
                                  [peer.addr + a - local for a in addrs],
                                  [MiB] * 3, TransferOpcode.Read) == 0


@pytest.mark.parametrize("size", SIZES)
def test_batch_async(te, local, peer, size):
    put(te, local, pattern(41, 2 * size))
    ids = [te.batch_transfer_async_write(peer.name, [local], [peer.addr],
                                         [size]),
           te.batch_transfer_async(peer.name, [local + size],
                                   [peer.addr + size], [size],
                                   TransferOpcode.Write)]
    assert all(i > 0 for i in ids)
    assert te.get_batch_transfer_status(ids) == 0
    peer.check(41, 0, 2 * size)
    peer.fill(42, 0, size)
    bid = te.batch_transfer_async_read(peer.name, [local], [peer.addr],
                                       [size])
    assert bid > 0
    assert te.get_batch_transfer_status([bid]) == 0
    assert te.read_bytes_from_buffer(local, size) == pattern(42, size)


def test_transfer_submit_and_check(te, local, peer):
    put(te, local, pattern(51, 16 * MiB))
    bid = te.transfer_submit_write(peer.name, local, peer.addr, 16 * MiB)
    assert bid > 0
    states = set()
    while (r := te.transfer_check_status(bid)) == 0:
        states.add(r)
    assert r == 1
    peer.check(51, 0, 16 * MiB)
    # freed once it said 1
    assert te.transfer_check_status(bid) == -1


def test_register_family(te):
    a = te.allocate_managed_buffer(MiB)
    assert a
    # overlapping an existing registration, as Mooncake: -7
    assert te.register_memory(a + 100, 10) == -7
    # nothing starts there: -3 (ERR_ADDRESS_NOT_REGISTERED)
    assert te.unregister_memory(a + 100) == -3
    assert te.register_memory(a, 0) == -1
    assert te.free_managed_buffer(a, MiB) == 0

    bufs = [bytearray(4096) for _ in range(4)]
    addrs = [xfer.address_of(b)[0] for b in bufs]
    assert te.batch_register_memory(addrs, [4096] * 4) == 0
    assert te.batch_register_memory(addrs[:1], [4096]) == -7
    assert te.batch_unregister_memory(addrs) == 0
    assert te.batch_unregister_memory(addrs[:1]) == -3
    assert te.batch_register_memory(addrs, [4096] * 3) == -1


def test_managed_buffers_and_first_address(te, peer):
    assert te.get_first_buffer_address(peer.name) == peer.addr
    a = te.allocate_managed_buffer(64 * 1024)
    assert a and a % 4096 == 0
    put(te, a, b"mooncake")
    assert te.read_bytes_from_buffer(a, 8) == b"mooncake"
    assert te.write_bytes_to_buffer(a, "text", 4) == 0
    assert te.read_bytes_from_buffer(a, 4) == b"text"
    assert te.free_managed_buffer(a, 64 * 1024) == 0


def test_notifications(te, local, peer):
    put(te, local, pattern(61, 4096))
    assert te.transfer_sync(peer.name, local, peer.addr, 4096,
                            TransferOpcode.Write,
                            TransferNotify("kv", "block 7")) == 0
    assert peer.call("notifies")["notifies"] == [["kv", "block 7"]]
    peer.check(61, 0, 4096)
    # the other way: the peer sends, this side collects
    assert te.get_notifies() == []
    peer.call("notify", target=te.engine.name, name="hi", msg="there")
    assert te.get_notifies() == [TransferNotify("hi", "there")]


def test_threads(te, local, peer):
    """Threads share the engine: each call lets the GIL go while it
    waits."""
    import threading
    size, per = 64 * 1024, 20
    put(te, local, pattern(81, 4 * per * size))
    fails = []

    def run(t):
        for k in range(per):
            off = (t * per + k) * size
            if te.transfer_sync_write(peer.name, local + off,
                                      peer.addr + off, size) != 0:
                fails.append(off)
    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not fails
    peer.check(81, 0, 4 * per * size)


def test_send_probe(te, peer, dead_session):
    assert te.send_probe(peer.name) == 0
    assert te.send_probe(dead_session) == -1
    assert te.warmup_efa_segment(peer.name) == 0


def test_errors_as_mooncake(te, local, peer, dead_session):
    # a source outside registered memory
    unreg = bytearray(4096)
    src = xfer.address_of(unreg)[0]
    assert te.transfer_sync_write(peer.name, src, peer.addr, 4096) == -1
    assert te.transfer_sync_read(peer.name, src, peer.addr, 4096) == -1
    # an unknown session
    assert te.transfer_sync_write(dead_session, local, peer.addr, 1) == -1
    assert te.batch_transfer_sync_write(dead_session, [local], [peer.addr],
                                        [1]) == -1
    assert te.get_first_buffer_address(dead_session) == 0
    # a target outside the peer's buffers
    end = peer.addr + peer.len
    assert te.transfer_sync_write(peer.name, local, end - 10, 11) == -1
    assert te.transfer_sync_read(peer.name, local, end, 1) == -1
    assert te.batch_transfer_sync_write(peer.name, [local, local],
                                        [peer.addr, end], [1, 1]) == -1
    # the asynchronous forms: 0 for every failure, a session that cannot
    # be opened included (Mooncake's since its PR #2433)
    assert te.batch_transfer_async_write(peer.name, [local], [end],
                                         [1]) == 0
    assert te.batch_transfer_async_write(dead_session, [local], [0],
                                         [1]) == 0
    assert te.batch_transfer_async(dead_session, [local], [0], [1],
                                   TransferOpcode.Read) == 0
    assert te.transfer_submit_write(peer.name, local, end, 1) == 0
    assert te.transfer_submit_write(dead_session, local, peer.addr, 1) == 0
    assert te.get_batch_transfer_status([12345]) == -1
    # lists of different sizes
    assert te.batch_transfer_sync_write(peer.name, [local], [], [1]) == -1
    assert te.batch_transfer_async_write(peer.name, [local], [peer.addr],
                                         []) == 0
    # the engine still works
    put(te, local, pattern(71, 100))
    assert te.transfer_sync_write(peer.name, local, peer.addr, 100) == 0
    peer.check(71, 0, 100)


def test_async_submit_to_unknown_peer_returns_zero(te):
    """Mooncake's test of that name (its PR #2433), as it is written."""
    assert te.batch_transfer_async_write("unreachable_peer:9", [0], [0],
                                         [16]) == 0
    assert te.transfer_submit_write("unreachable_peer:9", 0, 0, 16) == 0


def test_empty_async_batch_completes(te, peer):
    """Mooncake submits a batch of no request; polled, it completed."""
    bid = te.batch_transfer_async_write(peer.name, [], [], [])
    assert bid != 0
    assert te.get_batch_transfer_status([bid]) == 0


def test_check_status_timeout_kept(te, local, peer, monkeypatch):
    """A timed-out transfer_submit_write says -2, and again -2: Mooncake
    keeps the batch (it frees only completed and failed ones)."""
    monkeypatch.setenv("XFER_TRANSFER_TIMEOUT_MS", "300")
    slow = TransferEngine()
    assert slow.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    src = slow.allocate_managed_buffer(16 * MiB)
    try:
        assert slow.send_probe(peer.name) == 0   # the session is open
        peer.stop()
        bid = slow.transfer_submit_write(peer.name, src, peer.addr, 16 * MiB)
        assert bid != 0
        while (r := slow.transfer_check_status(bid)) == 0:
            pass
        assert r == -2
        assert slow.transfer_check_status(bid) == -2
    finally:
        peer.cont()
        slow._close()
