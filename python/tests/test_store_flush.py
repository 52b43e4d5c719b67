"""xfer.mooncake.store's flush modes (ReplicateConfig.flush, xfer's, from
the store's design) against a running xfer-stored, the slower tier a
temporary folder: an eager put's file is there when put returns, a lazy
one's later, none never; an object removed from DRAM reads back from
the tier; bad modes and a missing tier are -600."""
import os
import struct
import time

import pytest

from conftest import MiB, Master, pattern
from xfer.mooncake.store import (FlushMode, MooncakeDistributedStore,
                                 ReplicateConfig)

INVALID_PARAMS = -600


@pytest.fixture
def store():
    m = Master()
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 16 * MiB, 4 * MiB,
                   "tcp", "", m.addr) == 0
    yield s
    assert s.close() == 0
    m.stop()


def tier_file(root, key):
    name = "k" + \
        __import__("base64").urlsafe_b64encode(key.encode()).decode() \
        .rstrip("=")
    return os.path.join(root, name)


def version_of(root, key):
    try:
        with open(tier_file(root, key), "rb") as f:
            head = f.read(32)
    except FileNotFoundError:
        return 0
    assert head[:8] == b"XFERTIR1"
    return struct.unpack("<QQQ", head[8:])[0]


def test_flush_modes(store, tmp_path):
    root = str(tmp_path)
    assert store.put("x", b"v", ReplicateConfig(flush=FlushMode.EAGER)) \
        == INVALID_PARAMS                      # no tier yet
    assert store.set_root_fs_dir(root) == 0
    assert store.set_root_fs_dir(root) == -16  # -EBUSY
    assert store.put("x", b"v", ReplicateConfig(flush=7)) == INVALID_PARAMS
    value = pattern(1, 70000)
    assert store.put("eager", value,
                     ReplicateConfig(flush=FlushMode.EAGER)) == 0
    assert version_of(root, "eager") == store.sync()
    with open(tier_file(root, "eager"), "rb") as f:
        assert f.read()[32 + len("eager"):] == value
    assert store.put("lazy", value,
                     ReplicateConfig(flush=FlushMode.LAZY)) == 0
    assert store.put("none", value) == 0
    for _ in range(500):
        if version_of(root, "lazy"):
            break
        time.sleep(0.01)
    assert version_of(root, "lazy") == store.sync() - 1
    assert version_of(root, "none") == 0
    assert "flush: LAZY" in str(ReplicateConfig(flush=FlushMode.LAZY))
    # gone from DRAM: read back from the tier (the lazy one once the
    # master has its report)
    assert store.remove("eager") == 0
    assert store.get("eager") == value
    assert store.remove("lazy") == 0
    for _ in range(500):
        got = store.get("lazy")
        if got:
            break
        time.sleep(0.01)
    assert got == value
    assert store.remove("none") == 0
    assert store.get("none") == b""
