#!/usr/bin/env python3
"""xfer from Python against xfer-bench, in one run on loopback TCP.

WRITE batches of 128 requests of 64 KiB, one batch in flight, a target
and an initiator engine in one process, three ways: xfer-bench --mode
loopback (C), a Python loop of Mooncake's batch_transfer_sync_write
(xfer.mooncake), and a loop of ``await engine.write(...)`` (xfer.Engine
under asyncio). The three take turns for a few rounds, so that a busy
machine weighs on each alike. Prints each form's best round in GB/s (1e9
bytes a second) and its ratio to C's best, the median of the ratios
round by round, the CPU seconds per GB of the best round (every thread
of the process, both engines), and every round. Fails only when a run
fails, not on a ratio.

    bench/python_speed.py [--duration S] [--rounds N] [--batch_size N]
                          [--block_size B]
"""
import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else "python3"


def cpu_now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def c_bench(a):
    out = subprocess.run(
        [os.path.join(ROOT, "build", "xfer-bench"), "--mode", "loopback",
         "--operation", "write", "--protocol", "tcp", "--threads", "1",
         "--batch_size", str(a.batch_size), "--block_size",
         str(a.block_size), "--duration", str(a.duration), "--json"],
        check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    cpu = r["cpu_s_initiator"] + r["cpu_s_target"]
    return r["throughput_gbps"], cpu / (r["bytes"] / 1e9)


def engines(region):
    """A target and an initiator, each with a registered region, touched
    as xfer-bench touches its own (page faults stay out)."""
    from xfer.mooncake import TransferEngine

    os.environ.setdefault("MC_TCP_BIND_ADDRESS", "127.0.0.1")
    target, init = TransferEngine(), TransferEngine()
    for te in (target, init):
        if te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0:
            sys.exit("python_speed: initialize failed")
    bufs = []
    for te, byte in ((target, b"\0"), (init, b"\x5a")):
        addr = te.allocate_managed_buffer(region)
        te.write_bytes_to_buffer(addr, byte * region, region)
        bufs.append(addr)
    return target, init, bufs[0], bufs[1]


class Meter:
    """Batches moved over a.duration seconds: GB/s and CPU s per GB."""

    def __init__(self, a):
        self.bytes_per = a.batch_size * a.block_size
        self.n, self.cpu0, self.t0 = 0, cpu_now(), time.monotonic()
        self.end = self.t0 + a.duration

    def running(self):
        return time.monotonic() < self.end

    def result(self):
        dt, cpu = time.monotonic() - self.t0, cpu_now() - self.cpu0
        gb = self.n * self.bytes_per / 1e9
        return gb / dt, cpu / gb


def py_sync(a):
    target, init, tbuf, ibuf = engines(a.batch_size * a.block_size)
    name = target.engine.name
    offs = [i * a.block_size for i in range(a.batch_size)]
    srcs = [ibuf + o for o in offs]
    dsts = [tbuf + o for o in offs]
    lens = [a.block_size] * a.batch_size

    def step():
        if init.batch_transfer_sync_write(name, srcs, dsts, lens) != 0:
            sys.exit("python_speed: batch_transfer_sync_write failed")
    step()  # the session opens outside the timing
    try:
        m = Meter(a)
        while m.running():
            step()
            m.n += 1
        return m.result()
    finally:
        init._close()
        target._close()


def py_asyncio(a):
    target, init, tbuf, ibuf = engines(a.batch_size * a.block_size)
    e = init.engine
    pairs = [(ibuf + i * a.block_size, tbuf + i * a.block_size, a.block_size)
             for i in range(a.batch_size)]

    async def main():
        seg = await e.open_segment(target.engine.name)
        await e.write(seg, pairs)
        m = Meter(a)
        while m.running():
            await e.write(seg, pairs)
            m.n += 1
        return m.result()
    try:
        return asyncio.run(main())
    finally:
        init._close()
        target._close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float,
                   default=float(os.environ.get("DURATION", 5)))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--block_size", type=int, default=65536)
    a = p.parse_args()
    if os.path.realpath(sys.executable) != os.path.realpath(PYTHON):
        os.execv(PYTHON, [PYTHON, __file__] + sys.argv[1:])
    subprocess.run(["make", "-s", "-C", ROOT, "build/xfer-bench", "python"],
                   check=True)
    sys.path.insert(0, os.path.join(ROOT, "python"))

    forms = [("xfer-bench (C)", c_bench),
             ("python batch_transfer_sync_write", py_sync),
             ("python asyncio engine.write", py_asyncio)]
    rounds = [[run(a) for _, run in forms] for _ in range(a.rounds)]
    best = [max(r[i] for r in rounds) for i in range(len(forms))]
    print(f"WRITE {a.batch_size} x {a.block_size} B, one batch in flight, "
          f"loopback TCP, {a.rounds} rounds of {a.duration:g} s")
    print(f"{'run':34} {'GB/s':>6} {'ratio':>6} {'median':>6} "
          f"{'CPU s/GB':>8}   rounds (GB/s)")
    for i, (name, _) in enumerate(forms):
        ratios = sorted(r[i][0] / r[0][0] for r in rounds if r[0][0])
        print(f"{name:34} {best[i][0]:6.2f} {best[i][0] / best[0][0]:6.2f} "
              f"{ratios[len(ratios) // 2]:6.2f} {best[i][1]:8.3f}   " +
              " ".join(f"{r[i][0]:.2f}" for r in rounds))


if __name__ == "__main__":
    main()
