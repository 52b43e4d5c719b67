"""The store's tasks from Python: Mooncake's ``TaskType``, ``TaskStatus``
and ``QueryTaskResponse`` (mooncake-integration/store/store_py.cpp), its
``create_copy_task``, ``create_move_task`` and ``query_task``, and xfer's
``replicate`` (the store design's Replicate), as calls of
MooncakeDistributedStore (and their ``async_`` twins).

A task id is Mooncake's UUID as its binding gives it, a pair of
integers; xfer's master numbers its tasks, so ours are ``(0, n)``, and
``(0, 0)`` with an error.
"""
import enum
import struct

__all__ = ["TaskType", "TaskStatus", "QueryTaskResponse"]


class TaskType(enum.IntEnum):
    """Mooncake's TaskType; REPLICATE is xfer's."""
    REPLICA_COPY = 0
    REPLICA_MOVE = 1
    REPLICATE = 2


class TaskStatus(enum.IntEnum):
    """Mooncake's TaskStatus, its values."""
    PENDING = 0
    PROCESSING = 1
    FAILED = 2
    SUCCESS = 3


class QueryTaskResponse:
    """Mooncake's QueryTaskResponse: ``id`` and ``assigned_client`` (UUID
    pairs; the client's id zeros before one took a copy), ``type``,
    ``status``, ``created_at_ms_epoch``, ``last_updated_at_ms_epoch``
    (ms since 1970, the master's clock) and ``message``."""
    __slots__ = ("id", "type", "status", "created_at_ms_epoch",
                 "last_updated_at_ms_epoch", "assigned_client", "message")

    def __init__(self, tid, ttype, status, created, updated, client, msg):
        self.id = (0, tid)
        self.type = TaskType(ttype)
        self.status = TaskStatus(status)
        self.created_at_ms_epoch = created
        self.last_updated_at_ms_epoch = updated
        self.assigned_client = struct.unpack("<QQ", client)
        self.message = msg

    def __repr__(self):
        return (f"QueryTaskResponse(id={self.id}, type={int(self.type)}, "
                f"status={int(self.status)}, "
                f"created_at={self.created_at_ms_epoch}, "
                f"last_updated_at={self.last_updated_at_ms_epoch}, "
                f"assigned_client={self.assigned_client}, "
                f"message=\"{self.message}\")")


def _task_id(task_id):
    """The master's number of a task id: a UUID pair or an integer."""
    if isinstance(task_id, tuple) and len(task_id) == 2:
        task_id = task_id[1]
    if not isinstance(task_id, int) or not 0 <= task_id < 1 << 64:
        raise TypeError("task_id must be a (int, int) pair or an int")
    return task_id


def _made(r):
    return ((0, r), 0) if r > 0 else ((0, 0), r)


def _queried(r):
    return (None, r) if isinstance(r, int) else (QueryTaskResponse(*r), 0)


class TaskCalls:
    """The calls on tasks, a base of MooncakeDistributedStore (whose
    ``_plan`` and ``_call`` they use)."""

    def _p_replicate(self, key, replica_num, nof_replica_num=0):
        # a count out of range: 17, which the client refuses (-600)
        def count(n):
            return n if 0 <= n <= 16 else 17
        return self._plan(((0, 0), -600), "replicate", key,
                          count(replica_num), count(nof_replica_num),
                          finish=_made)

    def _p_query_task(self, task_id):
        return self._plan((None, -600), "query_task", _task_id(task_id),
                          finish=_queried)

    def _p_create_copy_task(self, key, targets):
        return self._plan(((0, 0), -600), "create_task",
                          [key, *targets], finish=_made)

    def _p_create_move_task(self, key, source, target):
        if not isinstance(source, str):
            raise TypeError("source must be str")
        return self._plan(((0, 0), -600), "create_task", [key, target],
                          source, finish=_made)

    def create_copy_task(self, key, targets):
        """Mooncake's: copy ``key`` into each segment named in
        ``targets`` (segment names as replica descriptors' endpoints),
        one copy at a time. ``(task_id, 0)``, or ``((0, 0), error)``: -704,
        -703, -101 a target not mounted, -600, -1401."""
        return self._call(self._p_create_copy_task(key, targets))

    def create_move_task(self, key, source, target):
        """Mooncake's: move ``key``'s replica in segment ``source`` into
        segment ``target`` (copied, then the source's dropped once no
        lease is left). As create_copy_task; -600 also when ``source``
        holds no replica of it."""
        return self._call(self._p_create_move_task(key, source, target))

    def replicate(self, key, replica_num, nof_replica_num=0):
        """xfer's own (the store design's Replicate): bring ``key`` to
        ``replica_num`` DRAM and ``nof_replica_num`` SSD replicas, up or
        down, as a task of the master's; later losses (a client expired)
        are made good to the same counts. ``(task_id, 0)``, or
        ``((0, 0), error)``: -704 not found, -703 its put not ended, -600
        counts adding up to 0 or past 16, -1401 too many tasks."""
        return self._call(self._p_replicate(key, replica_num,
                                            nof_replica_num))

    def query_task(self, task_id):
        """Mooncake's: ``(QueryTaskResponse, 0)``, or ``(None, error)``
        (-1400 TASK_NOT_FOUND: unknown, or one of more than the 10000
        finished tasks the master keeps)."""
        return self._call(self._p_query_task(task_id))
