"""Mooncake's Python TransferEngine on xfer.

Switch with one line::

    from mooncake.engine import TransferEngine    # before
    from xfer.mooncake import TransferEngine      # after

Method names, argument orders, defaults and return conventions are those
of Mooncake's binding (mooncake-integration/transfer_engine) at its
commit 3b5a594 (0.3.12.post1, after its PR #2433): every call returns 0,
a negative number, or 0 for "no batch", and never raises for an engine
error. docs/PYTHON.md tables them against Mooncake's.
Addresses are integers; lengths and capacities are bytes. A target is a
session id, ``"host:port"`` in P2PHANDSHAKE mode (the peer's
``local_hostname`` and ``get_rpc_port()``), else a segment name. Every
call that waits releases the GIL.

Where Mooncake behaves oddly it is matched, and said so in the method's
docstring. Differences, also said there: the waits sleep on the engine's
completion instead of polling a status in a loop; failures are decided
by the engine's own transfer timeout (``MC_TRANSFER_TIMEOUT`` seconds, as
Mooncake's) rather than by a second timer; managed buffers are each
registered on their own.
"""
import enum
import errno
import json
import os
import socket
import struct

from .. import _xfer
from .._engine import Engine
from .._types import Status

__all__ = [
    "TransferEngine", "TransferOpcode", "TransferNotify",
    "InnerTransferEngine", "Read", "Write",
    "SUPPORT_CUDA", "SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_MNNVL",
    "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK",
    "ERR_INVALID_ARGUMENT", "ERR_ADDRESS_NOT_REGISTERED",
    "ERR_ADDRESS_OVERLAPPED", "ERR_MEMORY",
]

# What Mooncake's module says of its build (USE_CUDA, USE_EFA ...): xfer
# moves host memory over TCP and RDMA, and none of these.
SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False
SUPPORT_INTRA_NVLINK = False

# Mooncake's InnerTransferEngine, what get_engine() returns: here the
# xfer.Engine underneath.
InnerTransferEngine = Engine

# Mooncake's error codes (its error.h), for the register family.
ERR_INVALID_ARGUMENT = -1
ERR_ADDRESS_NOT_REGISTERED = -3
ERR_ADDRESS_OVERLAPPED = -7
ERR_MEMORY = -302

_ERRNO_TO_MC = {
    errno.EINVAL: ERR_INVALID_ARGUMENT,
    errno.ENOENT: ERR_ADDRESS_NOT_REGISTERED,
    errno.EEXIST: ERR_ADDRESS_OVERLAPPED,
    errno.ENOMEM: ERR_MEMORY,
}


def _mc_code(exc):
    return _ERRNO_TO_MC.get(getattr(exc, "errno", None), ERR_INVALID_ARGUMENT)


class TransferOpcode(enum.IntEnum):
    """Mooncake's TransferEngine.TransferOpcode: Read = 0, Write = 1."""
    Read = _xfer.READ
    Write = _xfer.WRITE


# Mooncake's enum exports its values into the module too
Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """A notification: Mooncake's TransferNotify(name, msg). Given to
    transfer_sync()/batch_transfer_sync() it is sent to the target's
    owner once every byte arrived; get_notifies() returns them."""

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __repr__(self):
        return f"TransferNotify(name={self.name!r}, msg={self.msg!r})"

    def __eq__(self, other):
        return (isinstance(other, TransferNotify) and
                (self.name, self.msg) == (other.name, other.msg))


def _own_descriptor(port):
    """The segment descriptor an engine on 127.0.0.1:``port`` serves: a
    Metadata request on its handshake socket (docs/PROTOCOL.md section 1:
    a u64 length in host order, type byte 1, JSON). Raises OSError,
    ValueError."""
    body = b"\x01{}\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack("=Q", len(body)) + body)
        reply = bytearray()
        while chunk := s.recv(65536):
            reply += chunk
    (n,) = struct.unpack_from("=Q", reply)
    if n < 1 or len(reply) != 8 + n or reply[8] != 1:
        raise ValueError("malformed descriptor reply")
    return json.loads(reply[9:])


class _EmptyBatch:
    """A batch of no request: Mooncake's completes when polled."""
    outcome = Status.COMPLETED

    def cancel(self):
        pass

    def wait(self):
        pass

    def free(self):
        pass


def _conn_string(metadata_server, metadata_type):
    """Mooncake's buildConnString: P2PHANDSHAKE as is, a URL as is, else
    ``metadata_type://metadata_server``."""
    if metadata_server == "P2PHANDSHAKE" or "://" in metadata_server:
        return metadata_server
    return f"{metadata_type}://{metadata_server}"


class TransferEngine:
    """Mooncake's TransferEngine (its Python binding's methods, same
    arguments, same return codes) on an xfer engine. Make it, then
    initialize() it."""

    TransferOpcode = TransferOpcode

    def __init__(self):
        self._engine = None
        self._sessions = {}   # target_hostname -> Segment
        self._batches = {}    # batch id -> Batch
        self._managed = {}    # address -> length

    @property
    def engine(self):
        """The xfer.Engine underneath (None before initialize())."""
        return self._engine

    # -- setup ----------------------------------------------------------
    def initialize(self, local_hostname, metadata_server, protocol,
                   device_name):
        """Start the engine: ``local_hostname`` (``host`` or
        ``host:port``; the port is the handshake port, else a free one),
        ``metadata_server`` (``"P2PHANDSHAKE"``, ``etcd://``, ``redis://``,
        ``http://...`` URLs, or a bare ``host:port`` meaning etcd),
        ``protocol`` (``"tcp"`` or ``"rdma"``), ``device_name`` (RDMA
        devices, a comma list; ``""`` for every one). Returns 0, or -1
        (the reason is logged). Calling it again replaces the engine, as
        Mooncake does."""
        if metadata_server == "P2PHANDSHAKE" or "://" in metadata_server:
            scheme, _, rest = metadata_server.partition("://")
            if not rest:
                scheme, rest = "", metadata_server
        else:
            scheme, rest = "etcd", metadata_server
        return self.initialize_ext(local_hostname, rest, protocol,
                                   device_name, scheme)

    def initialize_ext(self, local_hostname, metadata_server, protocol,
                       device_name, metadata_type):
        """initialize() with the metadata backend apart: ``metadata_type``
        (``"etcd"``, ``"redis"``, ``"http"``) names it unless
        ``metadata_server`` is ``"P2PHANDSHAKE"`` or a URL. Returns 0 or
        -1."""
        self._close()
        cfg = {
            "metadata_server": _conn_string(metadata_server, metadata_type),
            "protocol": protocol or "tcp",
        }
        if local_hostname:
            cfg["local_server_name"] = local_hostname
        if device_name:
            cfg["device_names"] = device_name
        try:
            self._engine = Engine(cfg)
        except (_xfer.XferError, ValueError):
            return -1
        return 0

    def get_rpc_port(self):
        """The handshake (rpc) port this engine listens on; -1 before
        initialize()."""
        return self._engine.rpc_port if self._engine else -1

    def get_engine(self):
        """The engine underneath (an InnerTransferEngine: xfer.Engine),
        or None before initialize(); Mooncake's gives its C++ engine,
        which programs hand on to a store sharing it."""
        return self._engine

    def get_engine_ptr(self):
        """An opaque non-zero handle of the engine (0 before initialize());
        Mooncake gives its C++ object's address."""
        return id(self._engine) if self._engine else 0

    def get_local_topology(self, device_name=None):
        """This host's RDMA topology as Mooncake's JSON: the NIC priority
        matrix ``{"cpu:0": [[preferred NICs], [other NICs]], ...}`` that an
        RDMA engine builds (from sysfs, or XFER_NIC_PRIORITY_MATRIX),
        over the devices of ``device_name`` (a comma list; None or ``""``:
        every one). As Mooncake's, a throwaway engine (peer-to-peer,
        127.0.0.1) is made to build it; its descriptor is read back over
        its handshake port. Returns ``"{}"`` where no RDMA device can be
        opened (Mooncake lists its NUMA nodes with empty rows there)."""
        try:  # no device: no engine, and none of its error lines
            if not os.listdir("/sys/class/infiniband"):
                return "{}"
        except OSError:
            return "{}"
        cfg = {"metadata_server": "p2p", "protocol": "rdma",
               "bind_addr": "127.0.0.1", "auth_secret": "", "workers": 0}
        if device_name:
            cfg["device_names"] = device_name
        try:
            probe = Engine(cfg)
        except (_xfer.XferError, ValueError):
            return "{}"
        try:
            desc = _own_descriptor(probe.rpc_port)
        except (OSError, ValueError):
            return "{}"
        finally:
            probe.close()
        matrix = desc.get("priority_matrix", {})
        return json.dumps(matrix, indent=3, sort_keys=True) + "\n"

    def _close(self):
        for b in self._batches.values():
            b.free()
        self._batches.clear()
        self._sessions.clear()
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        for addr in self._managed:
            _xfer.release(addr)
        self._managed.clear()

    def __del__(self):
        try:
            self._close()
        except Exception:
            pass

    # -- memory ---------------------------------------------------------
    def register_memory(self, buffer_addr, capacity, location="*"):
        """Register ``capacity`` bytes at ``buffer_addr`` (remote access on)
        and wait until peers can see them. Returns 0, or Mooncake's codes:
        -7 (ERR_ADDRESS_OVERLAPPED), -1 (ERR_INVALID_ARGUMENT: a zero
        length or a bad location), -302 (ERR_MEMORY)."""
        if self._engine is None:
            return ERR_INVALID_ARGUMENT
        try:
            self._engine.register(buffer_addr, capacity, location=location)
        except (_xfer.XferError, ValueError, OverflowError) as e:
            return _mc_code(e)
        return 0

    def unregister_memory(self, buffer_addr):
        """Unregister the buffer that starts at ``buffer_addr``. Returns 0,
        -3 (ERR_ADDRESS_NOT_REGISTERED), or -1 while a transfer uses it
        (Mooncake has no such check)."""
        if self._engine is None:
            return ERR_INVALID_ARGUMENT
        try:
            self._engine.unregister(buffer_addr)
        except (_xfer.XferError, ValueError, OverflowError) as e:
            return _mc_code(e)
        return 0

    def batch_register_memory(self, buffer_addresses, capacities,
                              location="*"):
        """register_memory() for each (address, capacity). Returns 0, or
        the first error's code, with the buffers of this call registered
        before it unregistered again."""
        if len(buffer_addresses) != len(capacities):
            return ERR_INVALID_ARGUMENT
        done = []
        for addr, cap in zip(buffer_addresses, capacities):
            ret = self.register_memory(addr, cap, location)
            if ret:
                for a in done:
                    self.unregister_memory(a)
                return ret
            done.append(addr)
        return 0

    def batch_unregister_memory(self, buffer_addresses):
        """unregister_memory() for each address. Returns 0, or the last
        error's code (the others are still unregistered)."""
        ret = 0
        for addr in buffer_addresses:
            ret = self.unregister_memory(addr) or ret
        return ret

    def allocate_managed_buffer(self, length):
        """Allocate ``length`` bytes (page-aligned) and register them.
        Returns the address, or 0. Unlike Mooncake, which carves buffers
        up to 64 MiB out of 2 GiB slabs it registers once, each buffer is
        its own registration."""
        if self._engine is None or length <= 0:
            return 0
        try:
            addr = _xfer.alloc(length)
        except MemoryError:
            return 0
        if self.register_memory(addr, length):
            _xfer.release(addr)
            return 0
        self._managed[addr] = length
        return addr

    def free_managed_buffer(self, buffer_addr, length):
        """Unregister and free a buffer of allocate_managed_buffer().
        Returns 0 (always, as Mooncake's)."""
        if self._managed.pop(buffer_addr, None) is not None:
            self.unregister_memory(buffer_addr)
            _xfer.release(buffer_addr)
        return 0

    def write_bytes_to_buffer(self, dest_address, src_ptr, length):
        """Copy ``length`` bytes of ``src_ptr`` (bytes, or str as UTF-8)
        to ``dest_address``. Returns 0."""
        if isinstance(src_ptr, str):
            src_ptr = src_ptr.encode()
        _xfer.write_bytes(dest_address, src_ptr, length)
        return 0

    def read_bytes_from_buffer(self, source_address, length):
        """``length`` bytes at ``source_address``, as bytes."""
        return _xfer.read_bytes(source_address, length)

    # -- sessions -------------------------------------------------------
    def _session(self, target_hostname):
        """The open segment of a session, opened on first use (Mooncake's
        handle_map_); None if it cannot be opened."""
        seg = self._sessions.get(target_hostname)
        if seg is None and self._engine is not None:
            try:
                seg = self._engine.open_segment_sync(target_hostname)
            except (_xfer.XferError, ValueError):
                return None
            self._sessions[target_hostname] = seg
        return seg

    def _session_failed(self, target_hostname):
        """A transfer FAILED (the peer left, or broke the connection):
        forget the session, so that the next call opens it again."""
        seg = self._sessions.pop(target_hostname, None)
        if seg is not None:
            try:
                seg.close()
            except _xfer.XferError:
                pass  # transfers of other threads use it: keep it open

    def get_first_buffer_address(self, segment_name):
        """The address of the first buffer of a segment (opened if need
        be), or 0."""
        seg = self._session(segment_name)
        bufs = seg.buffers if seg is not None else []
        return bufs[0].addr if bufs else 0

    def send_probe(self, peer_server_name):
        """Check that a peer answers: its descriptor is fetched again over
        the handshake port. Returns 0, or -1."""
        seg = self._session(peer_server_name)
        if seg is None:
            return -1
        try:
            seg.refresh_sync()
        except _xfer.XferError:
            self._session_failed(peer_server_name)
            return -1
        return 0

    def warmup_efa_segment(self, segment_name):
        """A no-op returning 0, as Mooncake's builds without EFA."""
        return 0

    # -- blocking transfers ----------------------------------------------
    def _sync(self, target_hostname, opcode, buffers, peer_addresses,
              lengths, notify):
        seg = self._session(target_hostname)
        if seg is None:
            return -1
        if not buffers and len(peer_addresses) == len(lengths) == 0:
            return 0
        note = (notify.name, notify.msg) if notify is not None else None
        try:
            self._engine.transfer(opcode, seg, buffers, peer_addresses,
                                  lengths, notify=note)
        except _xfer.TransferError as e:
            if e.outcome == Status.FAILED:
                self._session_failed(target_hostname)
            return -1
        except (_xfer.XferError, ValueError, TypeError, OverflowError):
            return -1
        return 0

    def transfer_sync_write(self, target_hostname, buffer,
                            peer_buffer_address, length, transport_hint=""):
        """Write ``length`` bytes from local ``buffer`` to
        ``peer_buffer_address`` of the target, and wait. Returns 0, or -1
        (session unknown or unreachable, source not registered, target
        outside the peer's buffers, the transfer failed or timed out).
        ``transport_hint`` is accepted and ignored (the segment's
        descriptor names the transport)."""
        return self._sync(target_hostname, _xfer.WRITE, [buffer],
                          [peer_buffer_address], [length], None)

    def transfer_sync_read(self, target_hostname, buffer,
                           peer_buffer_address, length, transport_hint=""):
        """Read ``length`` bytes at ``peer_buffer_address`` of the target
        into local ``buffer``, and wait. Returns 0 or -1, as
        transfer_sync_write()."""
        return self._sync(target_hostname, _xfer.READ, [buffer],
                          [peer_buffer_address], [length], None)

    def transfer_sync(self, target_hostname, buffer, peer_buffer_address,
                      length, opcode, notify=None, transport_hint=""):
        """One transfer with ``opcode`` (TransferOpcode.Read or Write), and
        wait. With ``notify`` (a TransferNotify) it is sent to the
        target's owner once the bytes arrived, and the call returns once
        that owner acknowledged it. Returns 0 or -1."""
        return self._sync(target_hostname, int(opcode), [buffer],
                          [peer_buffer_address], [length], notify)

    def batch_transfer_sync_write(self, target_hostname, buffers,
                                  peer_buffer_addresses, lengths,
                                  transport_hint=""):
        """Write ``buffers[i]`` (``lengths[i]`` bytes) to
        ``peer_buffer_addresses[i]``, one batch, and wait. Returns 0, or
        -1 (also for lists of different sizes, as Mooncake; empty lists
        return 0)."""
        return self._sync(target_hostname, _xfer.WRITE, buffers,
                          peer_buffer_addresses, lengths, None)

    def batch_transfer_sync_read(self, target_hostname, buffers,
                                 peer_buffer_addresses, lengths,
                                 transport_hint=""):
        """Read into ``buffers[i]`` from ``peer_buffer_addresses[i]``, one
        batch, and wait. Returns 0 or -1."""
        return self._sync(target_hostname, _xfer.READ, buffers,
                          peer_buffer_addresses, lengths, None)

    def batch_transfer_sync(self, target_hostname, buffers,
                            peer_buffer_addresses, lengths, opcode,
                            notify=None, transport_hint=""):
        """One batch with ``opcode`` and an optional TransferNotify sent
        once every byte arrived; waits. Returns 0 or -1."""
        return self._sync(target_hostname, int(opcode), buffers,
                          peer_buffer_addresses, lengths, notify)

    # -- batches polled later ---------------------------------------------
    def _submit(self, target_hostname, opcode, buffers, peer_addresses,
                lengths):
        """Submit one batch: its id (non-zero), or 0 for every failure, as
        Mooncake's since its PR #2433 (a session that cannot be opened
        included; it returned -1 then)."""
        seg = self._session(target_hostname)
        if seg is None or len(buffers) != len(peer_addresses) or \
                len(buffers) != len(lengths):
            return 0
        if not buffers:
            b = _EmptyBatch()
        else:
            try:
                b = self._engine.batch(len(buffers))
            except (_xfer.XferError, ValueError):
                return 0
            try:
                b.submit(opcode, seg, buffers, peer_addresses, lengths)
            except (_xfer.XferError, ValueError, TypeError, OverflowError):
                b.free()
                return 0
            # Mooncake refuses a bad request at submit: so does this
            if Status.INVALID in b.statuses():
                b.free()
                return 0
        bid = id(b)
        self._batches[bid] = b
        return bid

    def batch_transfer_async_write(self, target_hostname, buffers,
                                   peer_buffer_addresses, lengths,
                                   transport_hint=""):
        """Submit a batch of writes and return at once: a batch id (a
        non-zero int) for get_batch_transfer_status(), or 0 for every
        failure (the session cannot be opened, lists of different sizes,
        a request refused). Empty lists give a batch that completes."""
        return self._submit(target_hostname, _xfer.WRITE, buffers,
                            peer_buffer_addresses, lengths)

    def batch_transfer_async_read(self, target_hostname, buffers,
                                  peer_buffer_addresses, lengths,
                                  transport_hint=""):
        """Submit a batch of reads; as batch_transfer_async_write()."""
        return self._submit(target_hostname, _xfer.READ, buffers,
                            peer_buffer_addresses, lengths)

    def batch_transfer_async(self, target_hostname, buffers,
                             peer_buffer_addresses, lengths, opcode,
                             transport_hint=""):
        """Submit a batch with ``opcode``; as
        batch_transfer_async_write()."""
        return self._submit(target_hostname, int(opcode), buffers,
                            peer_buffer_addresses, lengths)

    def get_batch_transfer_status(self, batch_ids):
        """Wait for the batches of ``batch_ids`` and free them. Returns 0 if
        every one completed, else -1; after a failure the batches not yet
        done are cancelled and freed too (Mooncake frees them without
        waiting). An unknown id counts as a failure."""
        failed = False
        for bid in batch_ids:
            b = self._batches.pop(bid, None)
            if b is None:
                failed = True
                continue
            if failed:
                b.cancel()
            b.wait()
            failed = failed or b.outcome != Status.COMPLETED
            b.free()
        return -1 if failed else 0

    def transfer_submit_write(self, target_hostname, buffer,
                              peer_buffer_address, length,
                              transport_hint=""):
        """Submit one write and return at once: a batch id for
        transfer_check_status(), or 0 for every failure (Mooncake's since
        its PR #2433; -1 before)."""
        return self._submit(target_hostname, _xfer.WRITE, [buffer],
                            [peer_buffer_address], [length])

    def transfer_check_status(self, batch_id):
        """Status of a transfer_submit_write() (its first task): 1
        completed and 0 in flight, -1 failed, -2 timed out (Mooncake's
        codes). Once it says 1 or -1 the batch is freed; a timed-out one
        is kept and says -2 again, as Mooncake's. An unknown id answers
        -1 (Mooncake's reads freed memory)."""
        b = self._batches.get(batch_id)
        if b is None:
            return -1
        st = Status(b.status(0)[0])
        if st == Status.WAITING:
            return 0
        if st == Status.TIMEOUT:
            return -2
        del self._batches[batch_id]
        b.free()
        return 1 if st == Status.COMPLETED else -1

    # -- notifications ----------------------------------------------------
    def get_notifies(self):
        """Every notification received since the last call, oldest first,
        as a list of TransferNotify (Mooncake's getNotifies)."""
        if self._engine is None:
            return []
        return [TransferNotify(n.name, n.msg)
                for n in self._engine.get_notifies()]
