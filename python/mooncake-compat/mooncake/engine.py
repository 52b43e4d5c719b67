"""mooncake.engine on xfer: Mooncake's Python TransferEngine, its
TransferOpcode and TransferNotify, and its module constants (SUPPORT_*),
all from xfer.mooncake (see its docstrings and docs/PYTHON.md)."""
from xfer.mooncake import *  # noqa: F401,F403
from xfer.mooncake import __all__  # noqa: F401
