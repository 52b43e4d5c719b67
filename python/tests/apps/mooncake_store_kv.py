"""A program written for Mooncake's store, as its users write it (the
calls and checks of SGLang's HiCache backend, vLLM's store connector and
LMCache), kept unmodified: the tests run it where only xfer and
xfer-mooncake are installed, against the master named by MOONCAKE_MASTER.
It prints one line per step and exits 0 once every byte read is checked."""
import asyncio
import ctypes
import os
import sys
import uuid

try:
    from mooncake.store import MooncakeDistributedStore, ReplicateConfig
except ImportError as e:
    raise ImportError(
        "Please install mooncake by following the instructions at "
        "https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/build.md "
        "to run SGLang with MooncakeStore backend.") from e
from mooncake.async_store import MooncakeDistributedStoreAsync

MiB = 1 << 20
PAGE = 64 * 1024


def main():
    master = os.environ["MOONCAKE_MASTER"]
    store = MooncakeDistributedStore()
    # vLLM: the configuration as a dict of strings
    ret = store.setup({
        "local_hostname": "127.0.0.1",
        "metadata_server": "P2PHANDSHAKE",
        "global_segment_size": "64mb",
        "local_buffer_size": "16mb",
        "protocol": "tcp",
        "rdma_devices": "",
        "master_server_addr": master,
    })
    if ret != 0:
        raise RuntimeError(f"Initialize MooncakeStore failed: {ret}")
    print("setup ok", store.health_check())

    # SGLang's warm-up
    warmup_key = "sglang_mooncake_store_warmup_key" + uuid.uuid4().hex
    warmup_value = bytes(4 * 1024)
    assert store.put(warmup_key, warmup_value) == 0
    assert store.is_exist(warmup_key) == 1
    assert store.get(warmup_key) == warmup_value
    print("warmup ok")

    # the host KV pool, registered once, pages put and read back zero-copy
    pool_size = 32 * PAGE
    pool = (ctypes.c_uint8 * pool_size)()
    ptr = ctypes.addressof(pool)
    assert store.register_buffer(ptr, pool_size) == 0
    for i in range(pool_size):
        pool[i] = (i * 7 + i // PAGE) & 0xFF
    want = bytes(pool)
    keys = [f"page_{uuid.uuid4().hex}_{i}_k" for i in range(16)]
    exist = store.batch_is_exist(keys)
    missing = [i for i, e in enumerate(exist) if e != 1]
    assert len(missing) == 16
    put = store.batch_put_from([keys[i] for i in missing],
                               [ptr + i * PAGE for i in missing],
                               [PAGE] * len(missing))
    assert all(r == 0 for r in put), put
    got = store.batch_get_into(keys, [ptr + (16 + i) * PAGE
                                      for i in range(16)], [PAGE] * 16)
    assert all(r > 0 for r in got), got
    assert bytes(pool)[16 * PAGE:] == want[:16 * PAGE]
    print("batch_put_from / batch_get_into ok")

    # vLLM: a block from the K and V buffers of one layer
    block = [f"block_{uuid.uuid4().hex}"]
    ret = store.batch_put_from_multi_buffers(block, [[ptr, ptr + PAGE]],
                                             [[1024, 1024]])
    assert ret == [0], ret
    ret = store.batch_get_into_multi_buffers(block, [[ptr + 20 * PAGE,
                                                      ptr + 21 * PAGE]],
                                             [[1024, 1024]])
    assert ret == [2048], ret
    assert bytes(pool)[20 * PAGE:20 * PAGE + 1024] == want[:1024]
    print("multi buffers ok")

    # LMCache: a header and a body as one object; buffers handed back
    config = ReplicateConfig()
    config.replica_num = 1
    lm_key = f"lmcache_{uuid.uuid4().hex}"
    assert store.put_parts(lm_key, b"HDR1", memoryview(want[:PAGE]),
                           config=config) == 0
    bufs = store.batch_get_buffer([lm_key])
    assert bufs[0] is not None and bufs[0].size() == 4 + PAGE
    assert bytes(memoryview(bufs[0])[:4]) == b"HDR1"
    assert store.get_size(lm_key) == 4 + PAGE
    print("put_parts / batch_get_buffer ok")

    async def use_async():
        a = MooncakeDistributedStoreAsync()
        assert await a.async_setup("127.0.0.1", "P2PHANDSHAKE", 16 * MiB,
                                   16 * MiB, "tcp", "", master) == 0
        assert await a.async_put("async_key", b"async value") == 0
        assert await store_get("async_key") == b"async value"
        assert await a.async_get(lm_key) == b"HDR1" + want[:PAGE]
        assert await a.async_close() == 0

    async def store_get(key):
        return store.get(key)

    asyncio.run(use_async())
    print("async ok")

    assert store.remove_all(True) > 0
    assert store.unregister_buffer(ptr) == 0
    assert store.close() == 0
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
