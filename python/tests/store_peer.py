"""The other client process of the store tests: a MooncakeDistributedStore
(xfer.mooncake.store) set up against a master, driven by JSON lines on
stdin, answering on stdout.

    store_peer.py MASTER [SEGMENT_BYTES]

The first line out is {"hostname"}: its segment's name. Commands:
  put (key, seed, len, replicas=1, preferred=""): put() of pattern(seed,
      len) with that ReplicateConfig -> {"r"};
  put_from (key, seed, len): the same from a registered buffer, zero-copy;
  get (key): get() -> {"len", "digest"};
  call (method, args): any method with JSON arguments -> {"r"};
  quit.
"""
import hashlib
import json
import random
import sys

from xfer import address_of
from xfer.mooncake.store import MooncakeDistributedStore, ReplicateConfig


def pattern(seed, n):
    return random.Random(seed).randbytes(n)


def main():
    master = sys.argv[1]
    seg = int(sys.argv[2]) if len(sys.argv) > 2 else 64 << 20
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", seg, 16 << 20, "tcp", "",
                     master)
    assert rc == 0, rc
    print(json.dumps({"hostname": store.get_hostname()}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "quit":
            break
        if op == "put":
            cfg = ReplicateConfig(replica_num=cmd.get("replicas", 1),
                                  preferred_segment=cmd.get("preferred", ""))
            out = {"r": store.put(cmd["key"],
                                  pattern(cmd["seed"], cmd["len"]), cfg)}
        elif op == "put_from":
            buf = bytearray(pattern(cmd["seed"], cmd["len"]))
            addr, n = address_of(buf)
            assert store.register_buffer(addr, n) == 0
            out = {"r": store.put_from(cmd["key"], addr, n)}
            assert store.unregister_buffer(addr) == 0
        elif op == "get":
            data = store.get(cmd["key"])
            out = {"len": len(data),
                   "digest": hashlib.sha256(data).hexdigest()}
        else:
            out = {"r": getattr(store, cmd["method"])(*cmd["args"])}
        print(json.dumps(out), flush=True)
    assert store.close() == 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
