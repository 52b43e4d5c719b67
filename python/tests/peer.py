"""The other process of the two-process tests: an engine with one
registered buffer, driven by JSON lines on stdin, answering on stdout.

    peer.py MODE SIZE [CONFIG-JSON]
MODE ``mooncake``: xfer.mooncake.TransferEngine (managed buffer);
``native``: xfer.Engine (a registered bytearray). CONFIG-JSON: for
mooncake, {"local_hostname", "metadata_server"}; for native, engine keys.
The first line out is {"name", "addr", "len"}. Commands: fill / check
(seed, off, len: the bytes of pattern(seed, len) at buffer offset off),
zero, digest (sha256 of off, len), notifies (those received), wait_notify (timeout s), notify (target,
name, msg: sent from here), register (len: one more buffer), quit.
"""
import hashlib
import json
import random
import sys
import time

import xfer
from xfer.mooncake import TransferEngine


def pattern(seed, n):
    return random.Random(seed).randbytes(n)


class MooncakePeer:
    def __init__(self, size, cfg):
        self.te = TransferEngine()
        rc = self.te.initialize(cfg.get("local_hostname", "127.0.0.1"),
                                cfg.get("metadata_server", "P2PHANDSHAKE"),
                                "tcp", "")
        assert rc == 0, rc
        self.addr = self.te.allocate_managed_buffer(size)
        assert self.addr
        self.name = self.te.engine.name
        self.extra = []

    def write(self, off, data):
        self.te.write_bytes_to_buffer(self.addr + off, data, len(data))

    def read(self, off, n):
        return self.te.read_bytes_from_buffer(self.addr + off, n)

    def notifies(self):
        return [[n.name, n.msg] for n in self.te.get_notifies()]

    def engine(self):
        return self.te.engine


class NativePeer:
    def __init__(self, size, cfg):
        self.e = xfer.Engine(cfg)
        self.buf = bytearray(size)
        self.addr = self.e.register(self.buf).addr
        self.name = self.e.name
        self.extra = []

    def write(self, off, data):
        self.buf[off:off + len(data)] = data

    def read(self, off, n):
        return bytes(self.buf[off:off + n])

    def notifies(self):
        return [list(n) for n in self.e.get_notifies()]

    def engine(self):
        return self.e


def serve(peer, size):
    print(json.dumps({"name": peer.name, "addr": peer.addr, "len": size}),
          flush=True)
    got = []
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        out = {"ok": True}
        if op == "fill":
            peer.write(cmd["off"], pattern(cmd["seed"], cmd["len"]))
        elif op == "zero":
            peer.write(cmd["off"], bytes(cmd["len"]))
        elif op == "check":
            have = peer.read(cmd["off"], cmd["len"])
            want = pattern(cmd["seed"], cmd["len"])
            if have != want:
                bad = next(i for i in range(len(want)) if have[i] != want[i])
                out = {"ok": False, "first_bad": bad}
        elif op == "digest":
            out["digest"] = hashlib.sha256(
                peer.read(cmd["off"], cmd["len"])).hexdigest()
        elif op == "notifies":
            got += peer.notifies()
            out["notifies"], got = got, []
        elif op == "wait_notify":
            end = time.monotonic() + cmd.get("timeout", 5)
            while not got and time.monotonic() < end:
                got += peer.notifies()
                time.sleep(0.005)
            out["notifies"], got = got, []
        elif op == "notify":
            e = peer.engine()
            e.notify_sync(cmd["target"], cmd["name"], cmd["msg"])
        elif op == "register":
            buf = bytearray(cmd["len"])
            peer.extra.append(buf)
            out["addr"] = peer.engine().register(buf).addr
        elif op == "quit":
            print(json.dumps(out), flush=True)
            break
        print(json.dumps(out), flush=True)


def main():
    mode, size = sys.argv[1], int(sys.argv[2])
    cfg = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    peer = (MooncakePeer if mode == "mooncake" else NativePeer)(size, cfg)
    serve(peer, size)


if __name__ == "__main__":
    main()
