"""Interop: a Python engine with a C one (xfer-bench), and Python engines
that find each other through xfer-metad and through redis."""
import json
import shutil
import socket
import subprocess
import time

import pytest

from conftest import MiB, build_tool, free_port, pattern
from xfer.mooncake import TransferEngine, TransferNotify, TransferOpcode


def bench_pattern(off, n):
    """xfer-bench --verify's bytes at [off, off+n) of its buffer."""
    return bytes((i * 131 + (i >> 8) + 7) & 0xff for i in range(off, off + n))


@pytest.fixture
def bench_target():
    bench = build_tool("xfer-bench")
    proc = subprocess.Popen([bench, "--mode", "target", "--bind_addr",
                             "127.0.0.1", "--duration", "0", "--verify",
                             "--protocol", "tcp", "--threads", "1",
                             "--buffer_size", str(4 * MiB)],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "segment" in line, line
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


@pytest.fixture
def te(monkeypatch):
    monkeypatch.setenv("MC_TCP_BIND_ADDRESS", "127.0.0.1")
    t = TransferEngine()
    yield t
    t._close()


def test_python_initiator_c_target(te, bench_target):
    assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    local = te.allocate_managed_buffer(MiB)
    remote = te.get_first_buffer_address(bench_target)
    assert remote
    n = 256 * 1024
    assert te.transfer_sync_read(bench_target, local, remote + 12345, n) == 0
    assert te.read_bytes_from_buffer(local, n) == bench_pattern(12345, n)
    data = pattern(131, n)
    te.write_bytes_to_buffer(local, data, n)
    assert te.batch_transfer_sync_write(bench_target, [local, local + 100],
                                        [remote + MiB, remote + MiB + 100],
                                        [100, n - 100]) == 0
    te.write_bytes_to_buffer(local, bytes(n), n)
    assert te.transfer_sync_read(bench_target, local, remote + MiB, n) == 0
    assert te.read_bytes_from_buffer(local, n) == data


def test_c_initiator_python_target(make_peer):
    bench = build_tool("xfer-bench")
    peer = make_peer("native", 2 * MiB, {"bind_addr": "127.0.0.1"})
    for op in ("write", "read"):
        out = subprocess.run(
            [bench, "--mode", "initiator", "--segment_id", peer.name,
             "--protocol", "tcp", "--threads", "1",
             "--operation", op, "--duration", "1", "--batch_size", "16",
             "--block_size", "65536", "--buffer_size", str(MiB),
             "--bind_addr", "127.0.0.1", "--json"]
            + (["--verify"] if op == "write" else []),
            check=True, capture_output=True, text=True, timeout=60).stdout
        r = json.loads(out.strip().splitlines()[-1])
        assert r["throughput_gbps"] > 0
        if op == "write":
            assert r["verified"] is True


def store_pair(make_peer, te, server):
    """A native peer and the Mooncake engine te, both on metadata
    @server, moving data by segment name and sending a notification."""
    peer = make_peer("native", 4 * MiB, {
        "metadata_server": server, "local_server_name": "py-target",
        "bind_addr": "127.0.0.1"})
    assert peer.name == "py-target"
    assert te.initialize("py-initiator", server, "tcp", "") == 0
    local = te.allocate_managed_buffer(4 * MiB)
    assert te.get_first_buffer_address("py-target") == peer.addr
    data = pattern(141, 4 * MiB)
    te.write_bytes_to_buffer(local, data, len(data))
    assert te.transfer_sync(peer.name, local, peer.addr, 4 * MiB,
                            TransferOpcode.Write,
                            TransferNotify("via", server)) == 0
    peer.check(141, 0, 4 * MiB)
    assert peer.call("notifies")["notifies"] == [["via", server]]
    peer.fill(142, 0, MiB)
    assert te.transfer_sync_read(peer.name, local, peer.addr, MiB) == 0
    assert te.read_bytes_from_buffer(local, MiB) == pattern(142, MiB)


def test_through_xfer_metad(make_peer, te, tmp_path):
    metad = build_tool("xfer-metad")
    port_file = tmp_path / "port"
    proc = subprocess.Popen([metad, "--port", "0", "--port-file",
                             str(port_file)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if port_file.exists() and port_file.read_text().strip():
                break
            time.sleep(0.02)
        port = int(port_file.read_text())
        store_pair(make_peer, te, f"http://127.0.0.1:{port}/metadata")
    finally:
        te._close()  # engines go before their server
        proc.terminate()
        proc.wait(timeout=10)


def wait_port(port, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listens on {port}")


def test_through_redis(make_peer, te):
    server = shutil.which("redis-server")
    if not server:
        pytest.skip("redis-server is not installed (make setup)")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL)
    try:
        wait_port(port)
        store_pair(make_peer, te, f"redis://127.0.0.1:{port}")
    finally:
        te._close()  # engines go before their server
        proc.terminate()
        proc.wait(timeout=10)


def test_env_is_read(make_peer, monkeypatch):
    """MC_* variables configure the engine as they do Mooncake's."""
    monkeypatch.setenv("MC_TCP_BIND_ADDRESS", "127.0.0.1")
    port = free_port()
    monkeypatch.setenv("MC_HANDSHAKE_PORT", str(port))
    t = TransferEngine()
    try:
        assert t.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
        assert t.get_rpc_port() == port
    finally:
        t._close()
