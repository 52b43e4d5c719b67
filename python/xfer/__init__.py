"""xfer: a transfer engine on libevent reactors, from Python.

Two ways in:

- ``xfer.mooncake.TransferEngine``: Mooncake's Python TransferEngine,
  method for method (switch with one import line), and
  ``xfer.mooncake.store.MooncakeDistributedStore``, Mooncake's client of
  the store (xfer-stored), its twin in asyncio in
  ``xfer.mooncake.async_store``;
- ``xfer.Engine``: the native API, with exceptions, context managers and
  asyncio (``await engine.write(segment, pairs)``) resolved by the
  engine's own completion callbacks through the event loop.

Sizes and offsets are in bytes everywhere. Buffers are integer addresses
(as Mooncake's) or objects with the buffer protocol (bytearray,
memoryview, numpy arrays), whose length is the object's.
"""
from ._xfer import XferError, TransferError, address_of
from ._engine import Engine
from ._types import (Segment, Registration, Notification,
                     SegmentBuffer, Status, Opcode, READ, WRITE)

__all__ = [
    "Engine", "Segment", "Registration", "Notification", "SegmentBuffer",
    "Status", "Opcode", "READ", "WRITE", "XferError", "TransferError",
    "address_of",
]
__version__ = "1.0.0"
