"""Hostile arguments to every call of xfer._xfer, from a fixed seed for a
bounded time: wrong types, wrong counts, integers at and past every width,
objects whose __index__, __str__ or iteration raise, read-only and
strided buffers, freed batches, closed engines, fake futures, from two
threads at once. Each call must return or raise a clean exception
(TypeError, ValueError, XferError ...), never SystemError (a C function
that returned NULL without an exception, or a result with one set), and
the process must not crash.

The calls run in a child under ``python -X dev`` (the debug allocator
catches writes past PyMem blocks; faulthandler prints where it crashed).
XFER_FUZZ_SECONDS (default 10) and XFER_FUZZ_SEED (default 22) change the
run; ``make fuzz-python`` runs it longer.

What is unchecked by contract stays out: raw addresses given to release(),
read_bytes(), write_bytes() and to register() with a length are the
caller's promise (as Mooncake's), so the fuzzer only gives those valid
memory; everything else is fair game.
"""
import asyncio
import collections
import os
import random
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SECONDS = float(os.environ.get("XFER_FUZZ_SECONDS", 10))
SEED = int(os.environ.get("XFER_FUZZ_SEED", 22))
KiB, MiB = 1 << 10, 1 << 20


def test_fuzz_args():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    r = subprocess.run([sys.executable, "-X", "dev", __file__, str(SEED),
                        str(SECONDS)], capture_output=True, text=True,
                       env=env, timeout=SECONDS * 6 + 120)
    print(r.stdout[-2000:])
    assert r.returncode == 0, (
        f"seed {SEED}: exit {r.returncode}\n{r.stdout[-3000:]}\n"
        f"{r.stderr[-6000:]}")
    assert "calls:" in r.stdout


# ---- the child -------------------------------------------------------------

class BadIndex:
    def __index__(self):
        raise ZeroDivisionError("hostile __index__")


class HugeIndex:
    def __index__(self):
        return 1 << 70


class BadStr:
    def __str__(self):
        raise ZeroDivisionError("hostile __str__")


class BadSeq:
    """Claims a huge length, then fails to iterate."""

    def __len__(self):
        return 1 << 62

    def __getitem__(self, i):
        if i > 3:
            raise ZeroDivisionError("hostile __getitem__")
        return 0

    def __iter__(self):
        raise ZeroDivisionError("hostile __iter__")


class FakeFuture:
    """A future whose every method raises, or reports done."""

    def __init__(self, done):
        self._done = done

    def done(self):
        if self._done is None:
            raise ZeroDivisionError("hostile done()")
        return self._done

    def cancelled(self):
        raise ZeroDivisionError("hostile cancelled()")

    def set_result(self, v):
        raise ZeroDivisionError("hostile set_result()")

    def set_exception(self, e):
        raise ZeroDivisionError("hostile set_exception()")

    def add_done_callback(self, cb):
        raise ZeroDivisionError("hostile add_done_callback()")


INTS = [0, 1, -1, 7, 4096, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63,
        2**64 - 1, 2**64, -2**63, -2**63 - 1, 2**100, -2**100]


class Fuzz:
    def __init__(self, seed):
        import xfer
        from xfer import _xfer
        self.xfer, self.x = xfer, _xfer
        self.tl = threading.local()
        self.tl.rng = random.Random(seed)
        self.loop = asyncio.new_event_loop()
        self.target = _xfer._Engine({"bind_addr": "127.0.0.1"})
        self.tbuf = bytearray(1 * MiB)
        self.target.register(self.tbuf)
        self.taddr = _xfer.address_of(self.tbuf)[0]
        self.local = bytearray(1 * MiB)
        self.raw = _xfer.alloc(256 * KiB)
        self.lock = threading.Lock()
        self.batches, self.futs = [], []
        self.eng = None
        self.new_engine()
        self.calls = collections.Counter()
        self.outcomes = collections.Counter()

    def new_engine(self):
        x = self.x
        e = x._Engine({"bind_addr": "127.0.0.1"})
        e.register(self.local)
        e.register(self.raw, 256 * KiB)
        self.seg = e.open_segment_sync(self.target.name)
        self.laddr = x.address_of(self.local)[0]
        old, self.eng = self.eng, e
        if old is not None:
            old.close()

    @property
    def rng(self):
        """Each thread's own generator."""
        return self.tl.rng

    # -- values ---------------------------------------------------------
    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def hostile(self):
        r = self.rng
        return self.pick([
            None, 1.5, float("nan"), "x", "", "a\0b", "é" * 300, b"ab",
            bytearray(8), memoryview(b"read-only"),
            memoryview(bytearray(64))[::2], [], (), [1, 2], [[1, 2, 3, 4]],
            {}, {"k": 1}, object(), BadIndex(), HugeIndex(), BadStr(),
            BadSeq(), True, self.pick(INTS), r.getrandbits(64),
            -r.getrandbits(64), self.x, self.eng, self.pick(
                self.batches) if self.batches else None])

    def hostile_obj(self):
        """A hostile value that is no integer address: those are the
        caller's promise."""
        while True:
            v = self.hostile()
            if not isinstance(v, (int, HugeIndex)):
                return v

    def plausible_int(self):
        return self.pick(INTS + [self.rng.randrange(1 << 20)])

    def length(self):
        r = self.rng
        return self.pick([0, 1, r.randrange(64 * KiB), r.randrange(MiB),
                          MiB, MiB + 1, 2**63, 2**64 - 1, -1, None,
                          self.hostile()])

    def source(self):
        r, mv = self.rng, memoryview(self.local)
        a = r.randrange(MiB)
        return self.pick([
            mv[a:a + r.randrange(64 * KiB)], mv[a:], mv[::3], bytes(16),
            self.laddr + a, self.raw + r.randrange(300 * KiB),
            self.plausible_int(), self.hostile()])

    def target_addr(self):
        r = self.rng
        return self.pick([self.taddr + r.randrange(MiB), self.taddr,
                          self.taddr + MiB - 1, self.taddr + MiB,
                          self.plausible_int(), self.hostile()])

    def segment(self):
        return self.pick([self.seg, self.seg, self.seg + 1, -1, 2**63 - 1,
                          2**64, self.hostile()])

    def opcode(self):
        return self.pick([self.x.READ, self.x.WRITE, self.x.WRITE, 2, -1,
                          self.hostile()])

    def name(self):
        return self.pick([self.target.name, "127.0.0.1:1", "127.0.0.1:0",
                          "127.0.0.1:99999", "", ":", "127.0.0.1",
                          "127.0.0.1:" + "9" * 40, "a\0b", "x" * 5000,
                          self.hostile()])

    def text(self):
        r = self.rng
        return self.pick(["", "n", "x" * r.randrange(2 * MiB), "a\0b",
                          "é" * 100, self.hostile()])

    def requests(self):
        """Keyword arguments of transfer() / submit()."""
        r = self.rng
        n = self.pick([0, 1, 2, r.randrange(1, 40)])
        kw = {}
        if r.random() < 0.6:
            pairs = []
            for _ in range(n):
                k = self.pick([2, 3, 3, 3, 1, 4])
                p = [self.source(), self.target_addr(), self.length()][:k]
                pairs.append(tuple(p + [0] * (k - len(p))) if r.random()
                             < 0.9 else self.hostile())
            kw["pairs"] = pairs if r.random() < 0.95 else self.hostile()
        else:
            m = n if r.random() < 0.8 else n + 1
            kw["sources"] = [self.source() for _ in range(n)]
            kw["targets"] = [self.target_addr() for _ in range(m)]
            if r.random() < 0.8:
                kw["lengths"] = [self.length() for _ in range(n)]
            if r.random() < 0.05:
                kw[self.pick(["sources", "targets", "lengths"])] = \
                    self.hostile()
        if r.random() < 0.1:
            kw["notify"] = self.pick([("n", "m"), ("n",), (self.text(),
                                      self.text()), self.hostile()])
        return kw

    def future(self):
        return self.pick([self.loop.create_future(), FakeFuture(False),
                          FakeFuture(True), FakeFuture(None), None,
                          self.hostile()])

    def batch(self):
        if self.batches and self.rng.random() < 0.9:
            return self.pick(self.batches)
        b = self.eng.batch(self.pick([1, 4, 64, 1 << 10]))
        self.batches.append(b)
        del self.batches[:-16]
        return b

    # -- calls ----------------------------------------------------------
    def calls_table(self):
        r, x = self.rng, self.x
        e = self.eng
        return [
            ("alloc", lambda: x.alloc(self.pick(
                [0, 1, 4096, 2**62, 2**64, -1, self.hostile()]))),
            ("alloc+release", lambda: x.release(x.alloc(4096))),
            ("release", lambda: x.release(self.pick(
                [0, -1, 2**64, BadIndex(), HugeIndex(), self.hostile_obj()]))),
            ("read_bytes", lambda: x.read_bytes(
                self.raw + r.randrange(128 * KiB),
                self.pick([0, 1, 64 * KiB, -1, 2**63, 2**64,
                           self.hostile_obj()]))),
            ("write_bytes", lambda: x.write_bytes(
                self.raw + r.randrange(128 * KiB),
                self.pick([b"abc", bytes(64 * KiB), "str", self.hostile()]),
                *self.pick([(), (3,), (-5,), (2**70,), (self.hostile(),)]))),
            ("address_of", lambda: x.address_of(self.hostile())),
            ("_Engine", lambda: x._Engine(self.pick([
                {"no_such_key": 1}, {"bind_addr": BadStr()},
                {"slice_size": -1}, {"slice_size": 2**70},
                {"rpc_port": "x"}, {1: 2}, [], self.hostile()]))),
            ("__init__ again", lambda: e.__init__({})),
            ("register", lambda: e.register(
                self.pick([self.local, memoryview(self.local)[
                    r.randrange(MiB):], bytearray(r.randrange(1, 4096)),
                    b"read-only", memoryview(bytearray(64))[::2],
                    self.hostile_obj()]),
                self.pick([None, None, 0, 16, 2**63, self.hostile()]),
                self.pick(["*", "cpu:0", "", "a\0b", "x" * 300,
                           self.hostile()]),
                self.pick([True, False, self.hostile()]))),
            ("register raw", lambda: e.register(
                self.raw + self.pick([0, 4096]),
                self.pick([None, 16, 4096, 128 * KiB, BadIndex(), -1]))),
            ("unregister", lambda: e.unregister(self.pick(
                [self.raw + 1, 0, bytearray(4), self.plausible_int(),
                 self.hostile()]))),
            ("open_segment_sync", lambda: e.open_segment_sync(self.name())),
            ("segment_close", lambda: e.segment_close(self.pick(
                [self.seg + 1 + r.randrange(4), -1, 2**64,
                 self.hostile()]))),
            ("segment_refresh_sync", lambda: e.segment_refresh_sync(
                self.segment())),
            ("segment_buffers", lambda: e.segment_buffers(self.segment())),
            ("notify_sync", lambda: e.notify_sync(
                self.segment(), self.text(), self.text())),
            ("notify_pop", lambda: e.notify_pop()),
            ("cpu_seconds", lambda: e.cpu_seconds()),
            ("device_stats", lambda: e.device_stats()),
            ("attrs", lambda: (e.name, e.rpc_port, e.last_error, e.closed)),
            ("transfer", lambda: e.transfer(
                self.opcode(), self.segment(), **self.requests())),
            ("transfer positional", lambda: e.transfer(
                *[self.hostile() for _ in range(r.randrange(7))])),
            ("batch", lambda: self.batches.append(e.batch(self.pick(
                [0, -1, 1, 64, 2**16, 2**24 + 1, 2**63, 2**64,
                 self.hostile()])))),
            ("submit", lambda: self.batch().submit(
                self.opcode(), self.segment(), **self.requests())),
            ("wait", lambda: self.batch().wait(self.pick(
                [0, 1, 20, 2**31, -2, self.hostile()]))),
            ("status", lambda: self.batch().status(self.pick(
                [0, 1, -1, 2**63, 2**64, self.hostile()]))),
            ("statuses", lambda: self.batch().statuses()),
            ("cancel", lambda: self.batch().cancel()),
            ("free", lambda: self.batch().free()),
            ("batch attrs", lambda: (lambda b: (
                b.size, b.capacity, b.done, b.outcome))(self.batch())),
            ("with batch", lambda: self.batch().__exit__(
                *[self.hostile() for _ in range(r.randrange(4))])),
            ("_on_future_done", lambda: self.batch()._on_future_done(
                self.future())),
            ("_aio_fileno", lambda: e._aio_fileno()),
            ("_aio_drain", lambda: e._aio_drain()),
            ("_aio_submit", lambda: self.futs.append(e._aio_submit(
                self.future(), self.opcode(), self.segment(),
                **self.requests()))),
            ("_aio_submit bare", lambda: e._aio_submit(
                *[self.hostile() for _ in range(r.randrange(3))])),
            ("_aio_open", lambda: e._aio_open(self.future(), self.name())),
            ("_aio_notify", lambda: e._aio_notify(
                self.future(), self.segment(), self.text(), self.text())),
            ("_aio_refresh", lambda: e._aio_refresh(
                self.future(), self.segment())),
            ("_aio_register", lambda: e._aio_register(
                self.future(), bytearray(r.randrange(1, 4096)),
                self.pick([None, 0, 2**63, self.hostile()]))),
            ("_aio_listen", lambda: e._aio_listen(self.pick(
                [None, print, lambda *a: 1 / 0, self.hostile()]))),
            ("close and restart", self.restart),
        ]

    def restart(self):
        if self.rng.random() < 0.05:
            self.new_engine()

    CLEAN = (TypeError, ValueError, OverflowError, IndexError, KeyError,
             MemoryError, BufferError, RuntimeError, ZeroDivisionError,
             UnicodeError, OSError)

    def one(self, table):
        name, fn = self.pick(table)
        self.calls[name] += 1
        try:
            fn()
            self.outcomes["ok"] += 1
        except SystemError:
            raise
        except self.CLEAN as exc:
            if isinstance(exc, self.x.XferError):
                assert exc.errno and exc.errno > 0, (name, exc)
            self.outcomes[type(exc).__name__] += 1

    def run(self, seconds):
        end = time.monotonic() + seconds
        fails = []

        def worker(seed):
            self.tl.rng = rng = random.Random(seed)
            while time.monotonic() < end and not fails:
                with self.lock:
                    table = self.calls_table()
                    name, fn = self.pick(table)
                # half the calls outside the lock: two threads at once
                try:
                    if rng.random() < 0.5:
                        with self.lock:
                            self.one([(name, fn)])
                    else:
                        self.one([(name, fn)])
                except BaseException as exc:  # a finding
                    fails.append((name, repr(exc)))
        threads = [threading.Thread(target=worker,
                                    args=(self.rng.random(),))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.eng.close()
        self.target.close()
        self.loop.close()
        return fails


def main():
    seed, seconds = int(sys.argv[1]), float(sys.argv[2])
    f = Fuzz(seed)
    fails = f.run(seconds)
    print(f"seed {seed}, {seconds:g} s, calls: {sum(f.calls.values())} "
          f"over {len(f.calls)} kinds; outcomes: {dict(f.outcomes)}")
    for name, exc in fails:
        print(f"FAIL {name}: {exc}")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
