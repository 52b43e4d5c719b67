"""xfer.Engine through asyncio, against a peer process (P2P, TCP): every
size, a batch of 1000, 100 concurrent awaited transfers, cancellation of a
pending transfer, notifications awaited, errors; the engine's futures are
settled by its callbacks through the loop, with no thread that polls."""
import asyncio
import errno
import os
import time

import pytest

import xfer
from conftest import MiB, SIZES, digest, pattern
from test_mooncake import batch_layout, gather_remote

LOCAL = 40 * MiB


@pytest.fixture
def peer(make_peer):
    return make_peer("native", 40 * MiB, {"bind_addr": "127.0.0.1"})


@pytest.fixture
def engine():
    with xfer.Engine(bind_addr="127.0.0.1") as e:
        yield e


@pytest.fixture
def local(engine):
    buf = bytearray(LOCAL)
    with engine.register(buf):
        yield buf


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.mark.parametrize("size", SIZES)
def test_write_read(engine, local, peer, size):
    async def main():
        seg = await engine.open_segment(peer.name)
        assert seg is await engine.open_segment(peer.name)
        assert seg.buffers[0] == (peer.addr, peer.len, "*")
        local[:size] = pattern(size, size)
        await engine.write(seg, [(memoryview(local)[:size], peer.addr + 1)])
        peer.check(size, 1, size)
        peer.fill(size + 1, 2, size)
        await engine.read(peer.name, [(xfer.address_of(local)[0],
                                       peer.addr + 2, size)])
        assert local[:size] == pattern(size + 1, size)
    run(main())


def test_batch_1000(engine, local, peer):
    offs, remote, lengths, total = batch_layout()
    data = pattern(81, total)
    local[:total] = data
    mv = memoryview(local)

    async def main():
        seg = await engine.open_segment(peer.name)
        await engine.write(seg, [(mv[o:o + n], peer.addr + r) for o, r, n in
                                 zip(offs, remote, lengths)])
        assert peer.digest(4096, total) == digest(
            gather_remote(data, offs, lengths, total))
        local[:total] = bytes(total)
        await engine.read(seg, [(mv[o:o + n], peer.addr + r) for o, r, n in
                                zip(offs, remote, lengths)])
        assert local[:total] == data
    run(main())


def test_100_concurrent(engine, local, peer):
    n, size = 100, 64 * 1024 + 1
    mv = memoryview(local)
    local[:n * size] = pattern(91, n * size)

    async def main():
        seg = await engine.open_segment(peer.name)
        await asyncio.gather(*(
            engine.write(seg, [(mv[i * size:(i + 1) * size],
                                peer.addr + i * size)]) for i in range(n)))
        peer.check(91, 0, n * size)
        peer.fill(92, 0, n * size)
        local[:n * size] = bytes(n * size)
        await asyncio.gather(*(
            engine.read(seg, [(mv[i * size:(i + 1) * size],
                               peer.addr + i * size)]) for i in range(n)))
        assert local[:n * size] == pattern(92, n * size)
    run(main())


def test_cancel_pending(engine, local, peer):
    """A read from a stopped peer is pending; cancelling its task cancels
    the batch: nothing lands in local memory after the peer resumes, the
    source is let go, and the engine goes on."""
    size = 16 * MiB
    peer.fill(101, 0, size)
    mv = memoryview(local)[:size]

    async def main():
        seg = await engine.open_segment(peer.name)
        peer.stop()
        try:
            task = asyncio.create_task(engine.read(seg, [(mv, peer.addr)]))
            await asyncio.sleep(0.2)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            peer.cont()
        # the batch ends CANCELED once the peer's answer is drained; the
        # memoryview is exported until then
        for _ in range(500):
            try:
                mv.release()
                break
            except BufferError:
                await asyncio.sleep(0.01)
        else:
            pytest.fail("the cancelled batch kept its source")
        assert local[:size] == bytes(size)
        local[:4096] = pattern(102, 4096)
        await engine.write(seg, [(memoryview(local)[:4096], peer.addr)])
        peer.check(102, 0, 4096)
    run(main())


def test_notifications_awaited(engine, local, peer):
    async def main():
        seg = await engine.open_segment(peer.name)
        # received here, awaited
        waiter = asyncio.create_task(engine.recv_notify())
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await asyncio.to_thread(peer.call, "notify", target=engine.name,
                                name="ready", msg="layer 3")
        assert await waiter == ("ready", "layer 3")
        # sent from here, alone and after a write
        await engine.notify(seg, "hello", "peer")
        local[:100] = pattern(111, 100)
        await engine.write(seg, [(memoryview(local)[:100], peer.addr)],
                           notify=("kv", "done"))
        got = peer.call("wait_notify")["notifies"]
        got += [] if len(got) == 2 else peer.call("wait_notify")["notifies"]
        assert got == [["hello", "peer"], ["kv", "done"]]
        peer.check(111, 0, 100)
        # several, through the async iterator
        for i in range(3):
            await asyncio.to_thread(peer.call, "notify", target=engine.name,
                                    name=f"n{i}", msg=str(i))
        it = engine.notifications()
        assert [await it.__anext__() for _ in range(3)] == [
            (f"n{i}", str(i)) for i in range(3)]
    run(main())


def test_errors(engine, local, peer, dead_session):
    async def main():
        with pytest.raises(xfer.XferError) as ei:
            await engine.open_segment(dead_session)
        assert ei.value.errno == errno.ECONNREFUSED
        seg = await engine.open_segment(peer.name)
        end = peer.addr + peer.len
        with pytest.raises(xfer.TransferError) as ei:
            await engine.write(seg, [(memoryview(local)[:10], end - 5)])
        assert ei.value.errno == errno.EINVAL
        assert ei.value.outcome == xfer.Status.INVALID
        assert ei.value.statuses == [xfer.Status.INVALID]
        unreg = bytearray(10)
        with pytest.raises(xfer.TransferError) as ei:
            await engine.write(seg, [(unreg, peer.addr),
                                     (memoryview(local)[:10], peer.addr)])
        assert ei.value.statuses == [xfer.Status.INVALID,
                                     xfer.Status.COMPLETED]
        with pytest.raises(TypeError):
            await engine.write(seg, [(12345, peer.addr)])  # no length
        with pytest.raises(ValueError):
            await engine.write(seg, [])
    run(main())


def test_register_and_refresh(engine, local, peer):
    async def main():
        extra = bytearray(MiB)
        reg = await engine.register_async(extra)
        assert reg.length == MiB
        with pytest.raises(xfer.XferError) as ei:
            engine.register(memoryview(extra)[10:20])
        assert ei.value.errno == errno.EEXIST
        reg.unregister()
        with pytest.raises(xfer.XferError) as ei:
            engine.unregister(extra)
        assert ei.value.errno == errno.ENOENT
        # a buffer the peer registers later is seen after a refresh
        seg = await engine.open_segment(peer.name)
        addr = peer.call("register", len=8192)["addr"]
        with pytest.raises(xfer.TransferError):
            await engine.write(seg, [(memoryview(local)[:10], addr)])
        await seg.refresh()
        assert addr in [b.addr for b in seg.buffers]
        await engine.write(seg, [(memoryview(local)[:10], addr)])
    run(main())


def test_sync_forms_and_context_managers(peer):
    with xfer.Engine({"bind_addr": "127.0.0.1"}, workers=2) as e:
        buf = bytearray(MiB)
        with e.register(buf) as reg, e.open_segment_sync(peer.name) as seg:
            assert reg.addr == xfer.address_of(buf)[0]
            buf[:] = pattern(121, MiB)
            e.write_sync(seg, [(buf, peer.addr)])
            peer.check(121, 0, MiB)
            with e.batch(4) as b:
                b.submit(xfer.READ, seg, pairs=[(buf, peer.addr + MiB)])
                assert b.wait() and b.done
                assert b.outcome == xfer.Status.COMPLETED
                assert b.status(0) == (xfer.Status.COMPLETED, MiB)
                b.submit(xfer.WRITE, seg, [reg.addr], [peer.addr], [10])
                b.wait()
                assert b.statuses() == [xfer.Status.COMPLETED] * 2
                assert b.size == 2 and b.capacity == 4
            with pytest.raises(ValueError):
                b.status(0)
            e.notify_sync(seg, "sync", "form")
            assert peer.call("wait_notify")["notifies"] == [["sync", "form"]]
        with pytest.raises(xfer.XferError):
            seg.close()  # closed already
        assert e.cpu_seconds() >= 0
    assert e.closed
    with pytest.raises(ValueError):
        e.name


def test_close_fails_pending(engine, local, peer):
    """Closing the engine under pending futures fails them."""
    async def main():
        seg = await engine.open_segment(peer.name)
        peer.stop()
        try:
            task = asyncio.create_task(engine.read(
                seg, [(memoryview(local)[:MiB], peer.addr)]))
            note = asyncio.create_task(engine.recv_notify())
            await asyncio.sleep(0.1)
            t0 = time.monotonic()
            engine.close()
            assert time.monotonic() - t0 < 5
            with pytest.raises(xfer.TransferError) as ei:
                await task
            assert ei.value.outcome in (xfer.Status.CANCELED,
                                        xfer.Status.FAILED)
            with pytest.raises(xfer.XferError):
                await note
        finally:
            peer.cont()
    run(main())


def test_numpy_buffers(engine, peer):
    np = pytest.importorskip("numpy")
    arr = np.arange(1 << 18, dtype=np.uint32)
    with engine.register(arr):
        async def main():
            await engine.write(peer.name, [(arr, peer.addr)])
            out = np.zeros_like(arr)
            with engine.register(out):
                await engine.read(peer.name, [(out, peer.addr)])
            assert (out == arr).all()
        run(main())


def test_idle_uses_no_cpu(engine, peer):
    """An idle engine under an idle loop sleeps: no thread polls."""
    async def main():
        await engine.open_segment(peer.name)
        waiter = asyncio.create_task(engine.recv_notify())
        t0 = os.times()
        c0 = engine.cpu_seconds()
        await asyncio.sleep(1.0)
        t1 = os.times()
        waiter.cancel()
        used = (t1.user + t1.system) - (t0.user + t0.system)
        assert used < 0.05, f"{used:.3f} s of CPU in 1 s idle"
        assert engine.cpu_seconds() - c0 < 0.05
    t = time.monotonic()
    run(main())
    assert time.monotonic() - t < 5
