"""Engine.close() racing other threads' calls on the same engine: the
process must not crash, and every call returns or raises cleanly.

Each case runs in a child process (``python -X faulthandler``), so that a
crash fails the test with the child's traceback instead of ending the
whole run:

- ``dying``: a Batch whose last reference goes while its transfer waits
  on a stopped peer frees itself in its dealloc, cancelling and waiting
  without the GIL; close() from another thread meanwhile must not take a
  reference to it (it did, freeing the batch twice: SIGSEGV in close()).
- ``rounds``: many rounds of close() at a random moment while threads
  transfer, submit and drop batches, submit with futures, register and
  unregister, and drain.
"""
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KiB, MiB = 1 << 10, 1 << 20


def run_child(mode, timeout=120):
    """Run the child's @mode; its output goes to files, not pipes, which
    a stopped peer of a crashed child would hold open; that peer (the
    child prints "peer PID") is killed."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    with tempfile.TemporaryFile("w+") as out:
        rc = subprocess.run([sys.executable, "-X", "faulthandler", __file__,
                             mode], stdout=out, stderr=subprocess.STDOUT,
                            text=True, env=env, timeout=timeout).returncode
        out.seek(0)
        text = out.read()
    for line in text.splitlines():
        if line.startswith("peer "):
            try:
                os.kill(int(line.split()[1]), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert rc == 0, f"{mode}: exit {rc}\n{text[-6000:]}"
    assert "ok" in text, text
    print(text[-500:])


def test_close_while_a_dying_batch_quiesces():
    run_child("dying")


def test_close_racing_calls_rounds():
    run_child("rounds", timeout=300)


# ---- the child -------------------------------------------------------------

def dying():
    sys.path.insert(0, HERE)
    import xfer
    from conftest import Peer

    peer = Peer("native", 4 * MiB)
    print(f"peer {peer.proc.pid}", flush=True)
    init = xfer.Engine(bind_addr="127.0.0.1", transfer_timeout_ms=1500)
    local = bytearray(4 * MiB)
    init.register(local)
    seg = init.open_segment_sync(peer.name)
    init.transfer(xfer.WRITE, seg, pairs=[(memoryview(local)[:KiB],
                                           peer.addr)])
    peer.stop()

    def drop():
        b = init.batch(1)
        b.submit(xfer.READ, seg, pairs=[(local, peer.addr)])
        del b   # the dealloc cancels, then waits for the stalled READ

    t = threading.Thread(target=drop)
    t.start()
    time.sleep(0.3)     # the dealloc waits, without the GIL
    init.close()
    t.join(30)
    peer.cont()
    assert not t.is_alive()
    peer.close()
    print("ok")


def rounds(n=40, seconds=60):
    import asyncio

    import xfer
    from xfer import _xfer

    target = xfer.Engine(bind_addr="127.0.0.1")
    tbuf = bytearray(4 * MiB)
    target.register(tbuf)
    taddr = xfer.address_of(tbuf)[0]
    rng = random.Random(7)
    end = time.monotonic() + seconds
    counts = {"calls": 0, "refused": 0}
    lock = threading.Lock()
    done = 0
    for done in range(1, n + 1):
        eng = _xfer._Engine({"bind_addr": "127.0.0.1"})
        local = bytearray(4 * MiB)
        eng.register(local)
        seg = eng.open_segment_sync(target.name)
        stop = threading.Event()

        def worker(kind, seed, eng=eng, local=local, seg=seg, stop=stop):
            r = random.Random(seed)
            loop = asyncio.new_event_loop()
            # futures failed by close() are never awaited here
            loop.set_exception_handler(lambda loop, ctx: None)
            mv = memoryview(local)
            while not stop.is_set():
                off = r.randrange(4) * MiB
                pair = [(mv[off:off + MiB], taddr + off)]
                try:
                    if kind == 0:
                        eng.transfer(r.choice([xfer.READ, xfer.WRITE]),
                                     seg, pairs=pair)
                    elif kind == 1:       # dropped while in flight
                        b = eng.batch(4)
                        b.submit(xfer.WRITE, seg, pairs=pair * 4)
                        del b
                    elif kind == 2:
                        eng._aio_submit(loop.create_future(), xfer.WRITE,
                                        seg, pairs=pair)
                        eng._aio_drain()
                    else:
                        extra = bytearray(r.randrange(1, 64 * KiB))
                        eng._aio_register(loop.create_future(), extra)
                        eng.unregister(extra)
                        eng._aio_drain()
                    with lock:
                        counts["calls"] += 1
                except (ValueError, _xfer.XferError):  # closing, closed
                    with lock:
                        counts["refused"] += 1
                    if eng.closed:
                        break
            loop.close()

        threads = [threading.Thread(target=worker, args=(k, rng.random()))
                   for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0, 0.05))
        eng.close()
        stop.set()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), f"round {done}"
        if time.monotonic() > end:
            break
    target.close()
    print(f"{done} rounds, {counts}: ok")


if __name__ == "__main__":
    {"dying": dying, "rounds": rounds}[sys.argv[1]]()
