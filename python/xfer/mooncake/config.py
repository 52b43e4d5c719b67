"""Mooncake's ReplicateConfig and the enums of its fields, for xfer.mooncake
.store (which exports them): what a put asks of the master."""
import enum
import operator


class SoftPinAction(enum.IntEnum):
    """What a put asks of the object's soft pin (Mooncake's)."""
    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2


class ObjectDataType(enum.IntEnum):
    """What an object holds (Mooncake's; informative only)."""
    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class FlushMode(enum.IntEnum):
    """When a put's object reaches the slower tier (the store's design's
    Eager / Lazy / None; include/xfer/store.h's enum xfer_kv_flush)."""
    NONE = 0
    EAGER = 1
    LAZY = 2


class ReplicateConfig:
    """What a put asks of the master (Mooncake's ReplicateConfig, its
    fields and defaults; they may also be given as keywords).

    - ``replica_num``: DRAM replicas, 0..16, each on a distinct segment
      (fewer when fewer segments have room);
    - ``nof_replica_num``: SSD replicas, in segments that clients lend
      with ``xfer_kv_mount_file()`` (docs/STORE.md); the two add up to
      1..16;
    - ``soft_pin_action`` (or ``with_soft_pin=True``): ENABLE keeps the
      object from eviction until nothing else can go;
    - ``with_hard_pin``: never evicted;
    - ``preferred_segments`` (its first) or ``preferred_segment``: the
      segment (a client's ``get_hostname()``) for the first replica;
    - ``flush`` (xfer's, from the store's design): ``FlushMode.NONE``
      (0), ``EAGER`` (the put returns once the object is in the slower
      tier) or ``LAZY`` (written there later); needs
      ``set_root_fs_dir()`` first.

    ``soft_pin_ttl_ms``, ``data_type`` and ``group_ids`` are kept and have
    no effect; ``dfs_replica_num`` (a distributed file system) and
    ``prefer_alloc_in_same_node`` other than their defaults
    make the put fail with -600 (INVALID_PARAMS), as Mooncake's does for
    the last.
    """

    def __init__(self, **fields):
        self.replica_num = 1
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.soft_pin_action = SoftPinAction.PRESERVE
        self.soft_pin_ttl_ms = None
        self.with_hard_pin = False
        self.preferred_segments = []
        self.preferred_nof_segments = []
        self.preferred_segment = ""
        self.prefer_alloc_in_same_node = False
        self.data_type = ObjectDataType.UNKNOWN
        self.group_ids = None
        self.flush = FlushMode.NONE
        for name, value in fields.items():
            if not hasattr(self, name) and name != "with_soft_pin":
                raise TypeError(f"ReplicateConfig has no field {name!r}")
            setattr(self, name, value)

    @property
    def with_soft_pin(self):
        """Mooncake's older form of ``soft_pin_action == ENABLE``."""
        return self.soft_pin_action == SoftPinAction.ENABLE

    @with_soft_pin.setter
    def with_soft_pin(self, on):
        self.soft_pin_action = (SoftPinAction.ENABLE if on else
                                SoftPinAction.PRESERVE)

    def __str__(self):
        ttl = "default" if self.soft_pin_ttl_ms is None else \
            self.soft_pin_ttl_ms
        action = SoftPinAction(self.soft_pin_action).name
        text = (f"ReplicateConfig: {{ replica_num: {self.replica_num}, "
                f"nof_replica_num: {self.nof_replica_num}, "
                f"dfs_replica_num: {self.dfs_replica_num}, "
                f"soft_pin_action: {action}, soft_pin_ttl_ms: {ttl}, "
                f"with_hard_pin: {int(bool(self.with_hard_pin))}, "
                f"preferred_segments: "
                f"[{', '.join(self.preferred_segments)}]")
        if self.preferred_segment:
            text += (f", preferred_segment (deprecated): "
                     f"{self.preferred_segment}")
        if self.flush:
            text += f", flush: {FlushMode(self.flush).name}"
        return text + " }"

    __repr__ = __str__

    def _args(self):
        """(replica_num, soft, hard, preferred, nof_replica_num, flush) for
        the client, or None if it asks for what the store has not."""
        n = operator.index(self.replica_num)
        nof = operator.index(self.nof_replica_num)
        if not 0 <= n <= 16 or not 0 <= nof <= 16 or \
                not 1 <= n + nof <= 16 or \
                self.dfs_replica_num or self.prefer_alloc_in_same_node:
            return None
        pref = (self.preferred_segments[0] if self.preferred_segments else
                self.preferred_segment) or None
        flush = operator.index(self.flush)
        if flush not in (0, 1, 2):
            return None
        return (n, self.soft_pin_action == SoftPinAction.ENABLE,
                bool(self.with_hard_pin), pref, nof, flush)
