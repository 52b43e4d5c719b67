"""Mooncake's `mooncake` package, for programs written for Mooncake, on
xfer: ``mooncake.engine`` is xfer's Mooncake-compatible TransferEngine
(xfer.mooncake); ``mooncake.store`` (MooncakeDistributedStore) and
``mooncake.async_store`` are the clients of xfer's store
(xfer.mooncake.store, xfer.mooncake.async_store).

Installed by the xfer-mooncake distribution (python/mooncake-compat),
which refuses to install beside Mooncake's own wheel. Should the two
still meet (one installed over the other, or both on sys.path), importing
fails with the reason rather than mixing their modules.
"""
import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))

# Files of Mooncake's wheel: its extension modules and Python modules
# xfer-mooncake does not have.
_THEIRS = ("engine.", "store.", "buffer_pool.py", "cli.py")


def _mooncake_wheel_in(folder):
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for n in names:
        if n.startswith(_THEIRS) and (n.endswith(".so") or
                                      n in _THEIRS):
            return os.path.join(folder, n)
    return None


def _check_alone():
    found = _mooncake_wheel_in(_HERE)
    for entry in sys.path:
        if found:
            break
        folder = os.path.realpath(os.path.join(entry or ".", "mooncake"))
        if folder != _HERE:
            found = _mooncake_wheel_in(folder)
    if found:
        raise ImportError(
            f"mooncake: Mooncake's own wheel ({found}) and xfer's "
            f"mooncake package ({_HERE}, from xfer-mooncake) are both "
            f"installed; uninstall one of them (pip uninstall "
            f"mooncake-transfer-engine, or pip uninstall xfer-mooncake)")


_check_alone()
