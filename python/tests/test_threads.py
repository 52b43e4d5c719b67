"""The binding under threads: one Batch submitted to from 64 threads
keeps every task, and Engine.close() returns while other threads keep
transferring (new calls are refused, those in flight are waited for)."""
import threading
import time

import pytest

import xfer

KiB = 1 << 10


@pytest.fixture
def pair():
    """A target engine with a registered buffer, and an initiator with its
    own, its segment open: (initiator, segment, local, target address)."""
    with xfer.Engine(bind_addr="127.0.0.1") as target, \
            xfer.Engine(bind_addr="127.0.0.1") as init:
        tbuf, local = bytearray(4 << 20), bytearray(4 << 20)
        with target.register(tbuf), init.register(local):
            seg = init.open_segment_sync(target.name)
            yield init, seg, local, xfer.address_of(tbuf)[0]


def start(threads):
    for t in threads:
        t.start()


def test_one_batch_many_threads(pair):
    init, seg, local, taddr = pair
    nthreads, per = 64, 20
    laddr = xfer.address_of(local)[0]
    for rnd in range(20):
        errors = []
        go = threading.Barrier(nthreads)
        b = init.batch(nthreads * per)

        def run(t):
            go.wait()
            try:
                for k in range(per):
                    i = t * per + k
                    b.submit(xfer.WRITE, seg, pairs=[
                        (laddr + i * KiB, taddr + i * KiB, KiB)])
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)
        threads = [threading.Thread(target=run, args=(t,))
                   for t in range(nthreads)]
        start(threads)
        for t in threads:
            t.join(30)
        assert not errors
        assert b.size == nthreads * per, f"round {rnd}: tasks lost"
        assert b.wait(20000), f"round {rnd}: the batch never completes"
        st = b.statuses()
        assert st.count(xfer.Status.COMPLETED) == nthreads * per, st
        b.free()


def test_batch_free_while_others_wait(pair):
    """free() from one thread while others wait on the batch: the waits
    end and later calls say the batch is freed."""
    init, seg, local, taddr = pair
    b = init.batch(64)
    b.submit(xfer.WRITE, seg, pairs=[(memoryview(local)[:KiB], taddr)])
    out = []

    def run():
        try:
            while True:
                b.wait(50)
                b.statuses()
        except ValueError as exc:
            out.append(str(exc))
    threads = [threading.Thread(target=run) for _ in range(8)]
    start(threads)
    time.sleep(0.1)
    b.free()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert out == ["the batch is freed"] * 8


def test_close_while_transferring(pair):
    init, seg, local, taddr = pair
    mv = memoryview(local)
    refused, other = [], []
    stop = time.monotonic() + 30

    def run(t):
        src = mv[t * 64 * KiB:(t + 1) * 64 * KiB]
        try:
            while time.monotonic() < stop:
                init.transfer(xfer.WRITE, seg,
                              pairs=[(src, taddr + t * 64 * KiB)])
                init.transfer(xfer.READ, seg,
                              pairs=[(src, taddr + t * 64 * KiB)])
        except ValueError:
            refused.append(t)
        except xfer.TransferError as exc:  # cancelled by close()
            refused.append(exc.outcome)
        except Exception as exc:  # pragma: no cover - reported below
            other.append(exc)
    threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
    start(threads)
    time.sleep(0.3)
    closer = threading.Thread(target=init.close)
    t0 = time.monotonic()
    closer.start()
    closer.join(15)
    assert not closer.is_alive(), "close() never returns"
    took = time.monotonic() - t0
    for t in threads:
        t.join(15)
    assert not any(t.is_alive() for t in threads)
    assert not other
    assert len(refused) == 8
    assert init.closed
    with pytest.raises(ValueError):
        init.transfer(xfer.WRITE, seg, pairs=[(mv[:KiB], taddr)])
    print(f"close() took {took:.3f} s under 8 transferring threads")


def test_close_waits_without_spinning(make_peer):
    """close() with a call in flight to a stalled peer (a segment being
    opened, which only its own timeout ends) waits for it, sleeping
    between its rounds of cancels rather than spinning."""
    peer = make_peer()
    init = xfer.Engine(bind_addr="127.0.0.1")
    peer.stop()
    ended = []

    def stuck():
        try:
            init.open_segment_sync(peer.name)
        except xfer.XferError as exc:  # ETIMEDOUT
            ended.append(exc)
    t = threading.Thread(target=stuck)
    t.start()
    time.sleep(0.2)
    wall, cpu = time.monotonic(), time.process_time()
    init.close()
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    t.join(10)
    peer.cont()
    assert ended and not t.is_alive()
    assert wall > 1                # it did wait for the call
    assert cpu < 0.25 * wall, (cpu, wall)


@pytest.mark.parametrize("opcode", [xfer.READ, xfer.WRITE])
def test_close_with_transfer_to_stopped_peer(make_peer, opcode):
    """close() while a blocking transfer waits on a stopped peer returns
    once the transfer timeout ends that transfer: close's cancels, made
    again every 100 ms past its grace (2 s), are no progress that would
    keep the timeout from firing."""
    timeout_ms = 3000             # past close's grace: its cancels repeat
    peer = make_peer(size=16 << 20)
    init = xfer.Engine(bind_addr="127.0.0.1", transfer_timeout_ms=timeout_ms)
    local = bytearray(16 << 20)
    init.register(local)
    seg = init.open_segment_sync(peer.name)
    init.transfer(xfer.WRITE, seg, pairs=[(memoryview(local)[:KiB],
                                           peer.addr)])
    peer.stop()
    ended = []

    def stuck():
        try:
            init.transfer(opcode, seg, pairs=[(local, peer.addr)])
        except xfer.TransferError as exc:  # TIMEOUT or CANCELED
            ended.append(exc.outcome)
    t = threading.Thread(target=stuck)
    t.start()
    time.sleep(0.3)
    closer = threading.Thread(target=init.close, daemon=True)
    t0 = time.monotonic()
    closer.start()
    closer.join(timeout_ms / 1000 + 10)
    took = time.monotonic() - t0
    alive = closer.is_alive()
    peer.cont()                   # lets a hung close() end, to clean up
    closer.join(30)
    t.join(30)
    assert not alive, f"close() still waits after {took:.1f} s"
    assert ended and not t.is_alive()
    assert init.closed
    print(f"close() took {took:.2f} s (transfer timeout {timeout_ms} ms)")
