"""The binding's reference counts: 100 000 transfers in one process (sync
with buffer objects, Mooncake's with addresses, awaited, and failing
ones) leave its memory and its objects where they were."""
import asyncio
import gc
import os
import sys

import xfer
from xfer.mooncake import TransferEngine

MiB = 1 << 20


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_100k_transfers_keep_memory(monkeypatch):
    monkeypatch.setenv("MC_TCP_BIND_ADDRESS", "127.0.0.1")
    target = TransferEngine()
    assert target.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    tbuf = target.allocate_managed_buffer(MiB)
    name = target.engine.name
    te = TransferEngine()
    assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    e = te.engine
    buf = bytearray(MiB)
    reg = e.register(buf)
    mv = memoryview(buf)
    seg = e.open_segment_sync(name)

    def sync_round(n):
        for k in range(n):
            e.write_sync(seg, [(mv[k % 512:k % 512 + 64], tbuf + k % 512)])

    def mooncake_round(n):
        for k in range(n):
            assert te.transfer_sync_write(name, reg.addr + k % 1024,
                                          tbuf, 128) == 0

    async def async_round(n):
        for k in range(n):
            await e.read(seg, [(mv[:256], tbuf + k % 256)])

    def failing_round(n):
        for _ in range(n):
            try:
                e.write_sync(seg, [(mv[:16], tbuf + MiB)])
            except xfer.TransferError:
                pass

    def all_rounds(n):
        sync_round(n * 4)
        mooncake_round(n * 3)
        asyncio.run(async_round(n * 3))
        failing_round(n // 10)

    all_rounds(500)                     # warm up: 5 050 transfers
    gc.collect()
    refs, objs, mem = sys.getrefcount(buf), len(gc.get_objects()), rss()
    all_rounds(9500)                    # 95 950 more: 101 000 in all
    gc.collect()
    grown = rss() - mem
    assert sys.getrefcount(buf) == refs
    assert len(gc.get_objects()) - objs < 1000
    print(f"RSS grew by {grown} bytes")
    assert grown < 4 * MiB, f"RSS grew by {grown} bytes"
    reg.unregister()
    te._close()
    target._close()
