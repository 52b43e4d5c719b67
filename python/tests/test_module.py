"""The extension module keeps its types and exceptions in its own state
(multi-phase initialisation, heap types): a second instance of the module
has its own, and a Batch is tracked by the cycle collector."""
import gc
import importlib.util
import weakref

import pytest

import xfer
from xfer import _xfer


def fresh_module():
    """A second module object from the same shared object."""
    spec = importlib.util.find_spec("xfer._xfer")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_heap_types_and_state():
    for t in (_xfer._Engine, _xfer.Batch):
        assert t.__flags__ & (1 << 9)                  # Py_TPFLAGS_HEAPTYPE
        with pytest.raises(TypeError):                 # immutable
            t.spam = 1
    with pytest.raises(TypeError):
        _xfer.Batch()
    assert xfer.XferError is _xfer.XferError
    assert issubclass(_xfer.TransferError, _xfer.XferError)


def test_second_module_has_its_own_state():
    m = fresh_module()
    assert m is not _xfer
    assert m._Engine is not _xfer._Engine
    assert m.XferError is not _xfer.XferError
    with pytest.raises(m.XferError) as ei:             # its own exception
        m._Engine({"no_such_key": 1})
    assert not isinstance(ei.value, _xfer.XferError)
    e = m._Engine({"bind_addr": "127.0.0.1"})
    with e.batch(2) as b:
        assert type(b) is m.Batch and type(b) is not _xfer.Batch
        with pytest.raises(m.XferError):
            b.submit(_xfer.WRITE, 0, pairs=[(0, 0, 1)] * 3)  # ENOSPC
    e.close()


class Buf(bytearray):
    """A buffer that can point back at the batch that exports it."""


def test_batch_in_a_cycle_is_collected():
    with xfer.Engine(bind_addr="127.0.0.1") as e:
        buf = Buf(64)
        b = e.batch(1)
        # an INVALID task (no such segment), but buf stays exported
        b.submit(xfer.WRITE, 1 << 40, pairs=[(buf, 0)])
        assert b.wait(10000)
        assert b.statuses() == [xfer.Status.INVALID]
        gone = weakref.ref(buf)
        buf.batch = b              # buf -> batch -> buf's exported view
        del b, buf
        gc.collect()
        assert gone() is None, "the cycle through the batch leaks"
