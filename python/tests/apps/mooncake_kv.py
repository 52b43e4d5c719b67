"""A program written for Mooncake's Python packages, as its users write
them (the import guards of SGLang's and vLLM's connectors, the calls of
Mooncake's own transfer engine tests), kept unmodified: the tests run it
where only xfer and xfer-mooncake are installed. It prints one line per
step and exits 0 once every byte moved is checked."""
import json
import sys

try:
    from mooncake.engine import TransferEngine
except ImportError as e:
    raise ImportError(
        "Please install mooncake by following the instructions at "
        "https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/build.md "
        "to run SGLang with MooncakeTransferEngine.") from e
import mooncake.engine as mc

MiB = 1 << 20


def start(name):
    engine = TransferEngine()
    ret = engine.initialize(name, "P2PHANDSHAKE", "tcp", "")
    if ret != 0:
        raise RuntimeError(f"Initialization failed with code {ret}")
    session_id = f"{name}:{engine.get_rpc_port()}"
    return engine, session_id


def main():
    print("cuda", mc.SUPPORT_CUDA, "musa", mc.SUPPORT_MUSA)
    prefill, prefill_id = start("127.0.0.1")
    decode, decode_id = start("127.0.0.1")
    assert prefill.get_engine() is not None
    assert prefill.get_engine_ptr() != 0
    json.loads(prefill.get_local_topology())

    kv = prefill.allocate_managed_buffer(4 * MiB)
    dst = decode.allocate_managed_buffer(4 * MiB)
    assert kv and dst
    assert decode.get_first_buffer_address(decode_id) == dst
    block = bytes(range(256)) * 4096
    assert prefill.write_bytes_to_buffer(kv, block, len(block)) == 0

    # the KV blocks, in pages, as a connector sends them
    pages = [kv + i * 64 * 1024 for i in range(16)]
    remote = [dst + i * 64 * 1024 for i in range(16)]
    ret = prefill.batch_transfer_sync_write(decode_id, pages, remote,
                                            [64 * 1024] * 16)
    assert ret == 0, ret
    assert decode.read_bytes_from_buffer(dst, MiB) == block
    print("batch_transfer_sync_write ok")

    bid = prefill.batch_transfer_async_read(decode_id, [kv + MiB],
                                            [dst], [MiB])
    assert bid != 0
    assert prefill.get_batch_transfer_status([bid]) == 0
    assert prefill.read_bytes_from_buffer(kv + MiB, MiB) == block
    print("batch_transfer_async_read ok")

    bid = prefill.transfer_submit_write(decode_id, kv, dst + 2 * MiB, MiB)
    assert bid != 0
    while (st := prefill.transfer_check_status(bid)) == 0:
        pass
    assert st == 1, st
    assert decode.read_bytes_from_buffer(dst + 2 * MiB, MiB) == block
    print("transfer_submit_write ok")

    ret = prefill.transfer_sync(decode_id, kv, dst, 4096,
                                TransferEngine.TransferOpcode.Write,
                                mc.TransferNotify("req-1", "kv ready"))
    assert ret == 0
    notes = decode.get_notifies()
    assert [(n.name, n.msg) for n in notes] == [("req-1", "kv ready")]
    print("notify ok")

    # Mooncake's test_async_submit_to_unknown_peer_returns_zero
    assert prefill.batch_transfer_async_write("unreachable_peer:9", [0],
                                              [0], [16]) == 0
    assert prefill.transfer_submit_write("unreachable_peer:9", 0, 0,
                                         16) == 0
    assert prefill.send_probe(decode_id) == 0
    print("unknown peer ok")

    try:
        from mooncake.store import MooncakeDistributedStore  # noqa: F401
        print("store available")
    except ImportError as e:
        print(f"store: {e}")

    assert prefill.free_managed_buffer(kv, 4 * MiB) == 0
    assert decode.free_managed_buffer(dst, 4 * MiB) == 0
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
