"""mooncake.store on xfer: Mooncake's MooncakeDistributedStore, its
ReplicateConfig, SoftPinAction, ObjectDataType and BufferHandle, all from
xfer.mooncake.store (see its docstrings and docs/PYTHON.md)."""
from xfer.mooncake.store import *  # noqa: F401,F403
from xfer.mooncake.store import __all__  # noqa: F401
