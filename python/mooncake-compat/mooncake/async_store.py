"""mooncake.async_store on xfer: Mooncake's MooncakeDistributedStoreAsync
from xfer.mooncake.async_store, whose async_NAME calls await the store
client's own callbacks."""
from xfer.mooncake.async_store import *  # noqa: F401,F403
from xfer.mooncake.async_store import __all__  # noqa: F401
