"""Replica descriptors as Mooncake's binding shapes them (its
``ReplicaDescriptor``, ``MemoryDescriptor``, ``Descriptor`` and
``ReplicaStatus``): what ``get_replica_desc`` and
``batch_get_replica_desc`` of xfer.mooncake.store answer. xfer's store
keeps memory replicas only, and answers complete ones only."""
import enum

__all__ = ["ReplicaStatus", "Descriptor", "MemoryDescriptor",
           "ReplicaDescriptor"]


class ReplicaStatus(enum.IntEnum):
    """A replica's state (Mooncake's)."""
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class Descriptor:
    """Where a memory replica's bytes lie: ``buffer_address`` in the
    process that owns the segment ``transport_endpoint`` (its engine's
    name), ``size`` bytes."""

    def __init__(self, buffer_address=0, size=0, transport_endpoint=""):
        self.buffer_address = buffer_address
        self.size = size
        self.transport_endpoint = transport_endpoint

    def __repr__(self):
        return (f"<Descriptor size={self.size} buffer_address="
                f"{self.buffer_address} transport_endpoint="
                f"{self.transport_endpoint}>")


class MemoryDescriptor:
    """A memory replica's ``buffer_descriptor`` (a Descriptor)."""

    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor


class ReplicaDescriptor:
    """One replica: its ``status`` and where it lies."""

    def __init__(self, addr, size, endpoint):
        self.status = ReplicaStatus.COMPLETE
        self._mem = MemoryDescriptor(Descriptor(addr, size, endpoint))

    @staticmethod
    def is_memory_replica():
        return True

    @staticmethod
    def is_disk_replica():
        return False

    @staticmethod
    def is_local_disk_replica():
        return False

    def get_memory_descriptor(self):
        return self._mem

    @staticmethod
    def get_disk_descriptor():
        raise RuntimeError("not a disk replica")  # Mooncake's throws too
