"""mooncake.store: Mooncake's distributed KV-cache store client
(MooncakeDistributedStore). xfer's store is not built yet: importing this
module says so rather than failing later on a missing name."""
raise ImportError(
    "mooncake.store: xfer has no KV-cache store yet, so "
    "MooncakeDistributedStore is not available from xfer-mooncake; "
    "only mooncake.engine (the TransferEngine) is. It comes with xfer's "
    "store.", name="mooncake.store")
