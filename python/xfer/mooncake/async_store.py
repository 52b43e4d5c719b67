"""Mooncake's MooncakeDistributedStoreAsync (``mooncake.async_store``) on
xfer's store.

Every call of MooncakeDistributedStore that talks to the master has an
awaitable twin, ``async_NAME`` (``await store.async_put(key, value)``),
with the same arguments and the same result. Mooncake's runs the
blocking call in the loop's thread pool; here no thread waits: the call
is started on the client's control reactor, whose callback queues its
end and writes an eventfd that the running loop watches
(``loop.add_reader``), so the future is settled on the loop's own thread.
Cancelling the awaiting task abandons the result, not the call: bytes a
get was reading into your memory may still arrive. The calls that do not
talk to the master (``setup``, ``init_all``, ``close``,
``register_buffer``, ``unregister_buffer``, ``health_check``,
``get_hostname``), and the segment calls (``mount_segment`` and its
kin), which register memory too, have twins run in the loop's default
executor as Mooncake's are, since they wait on the engine rather than on
a reply.
"""
import asyncio
import functools

from .store import CALLS, MooncakeDistributedStore, _Done

__all__ = ["MooncakeDistributedStoreAsync"]


class MooncakeDistributedStoreAsync(MooncakeDistributedStore):
    """MooncakeDistributedStore with ``async_NAME`` twins of its calls
    (see the module's docstring). One loop at a time: the client's queue
    follows the loop of the last call."""

    def __init__(self):
        super().__init__()
        self._bound = None  # (client, loop) whose reader is added

    def _bind(self, kv, loop):
        self._unbind()
        loop.add_reader(kv._aio_fileno(), kv._aio_drain)
        self._bound = (kv, loop)

    def _unbind(self):
        bound, self._bound = self._bound, None
        if bound is None:
            return
        kv, loop = bound
        if not loop.is_closed():
            # on the loop's thread: settle what the client's end left
            loop.call_soon_threadsafe(self._settle_last, kv, loop)

    @staticmethod
    def _settle_last(kv, loop):
        loop.remove_reader(kv._aio_fileno())
        kv._aio_drain()

    async def _await(self, plan):
        if isinstance(plan, _Done):
            return plan.value
        kv, method, args, kwargs, finish, idle = plan
        loop = asyncio.get_running_loop()
        if self._bound != (kv, loop):
            self._bind(kv, loop)
        fut = loop.create_future()
        try:
            getattr(kv, method)(*args, future=fut, **kwargs)
        except ValueError:
            if self._kv is not kv:  # closed meanwhile
                return idle
            raise
        return finish(await fut)

    def close(self):
        """As MooncakeDistributedStore.close(); the futures of calls that
        were in flight are settled on their loop's thread."""
        ret = super().close()
        self._unbind()
        return ret

    def __getattr__(self, name):
        """async_NAME of the calls that wait on the engine (setup, close
        ...): the blocking call in the loop's default executor."""
        sync = getattr(type(self), name[6:], None) \
            if name.startswith("async_") else None
        if sync is None or not callable(sync):
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '{name}'")

        @functools.wraps(sync)
        async def call(*args, **kwargs):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                None, functools.partial(sync, self, *args, **kwargs))
        return call


def _twin(name):
    plan = getattr(MooncakeDistributedStore, "_p_" + name)

    @functools.wraps(getattr(MooncakeDistributedStore, name))
    async def call(self, *args, **kwargs):
        return await self._await(plan(self, *args, **kwargs))
    call.__name__ = call.__qualname__ = "async_" + name
    return call


for _name in CALLS:
    setattr(MooncakeDistributedStoreAsync, "async_" + _name, _twin(_name))
