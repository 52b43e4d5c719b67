"""The Python case of the RDMA tier, run inside an rdmavm guest (--topo
lo) by rdma.sh: a peer process and this one, both with protocol "rdma",
move 4 MiB each way over rxe0 through xfer.mooncake, every byte checked,
and the bytes are seen on the device; get_local_topology() gives the
priority matrix over rxe0."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from conftest import MiB, Peer, pattern  # noqa: E402
from xfer.mooncake import TransferEngine  # noqa: E402


def main():
    n = 4 * MiB
    peer = Peer("native", n, {"protocol": "rdma",
                              "local_server_name": "127.0.0.1"})
    te = TransferEngine()
    try:
        assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "") == 0
        local = te.allocate_managed_buffer(n)
        assert local
        te.write_bytes_to_buffer(local, pattern(1, n), n)
        assert te.transfer_sync_write(peer.name, local, peer.addr, n) == 0
        peer.check(1, 0, n)
        peer.fill(2, 0, n)
        assert te.transfer_sync_read(peer.name, local, peer.addr, n) == 0
        assert te.read_bytes_from_buffer(local, n) == pattern(2, n)
        stats = te.engine.device_stats()
        assert sum(b for _, b in stats) >= 2 * n, stats
        topo = json.loads(te.get_local_topology())
        assert any("rxe0" in pref + rest for pref, rest in topo.values()), \
            topo
        assert json.loads(te.get_local_topology("rxe0")) == topo
        assert te.get_local_topology("nosuchdev") == "{}"
        print(f"rdma python: 4 MiB each way over {stats}, topology "
              f"{json.dumps(topo)}: ok")
    finally:
        te._close()
        peer.close()


if __name__ == "__main__":
    main()
