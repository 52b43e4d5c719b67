"""Fixtures of the Python tests: the build folder, peer processes, the
servers the interop tests start, and the byte patterns every check uses."""
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("XFER_BUILD", os.path.join(ROOT, "build"))

MiB = 1 << 20
# The sizes every transfer test moves, as the issue lists them.
SIZES = [1, 4096, 64 * 1024 + 1, 16 * MiB]


def pattern(seed, n):
    """n bytes that only seed and n decide, the same in every process."""
    return random.Random(seed).randbytes(n)


def digest(data):
    return hashlib.sha256(data).hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Peer:
    """A peer.py process: its engine's name, its buffer's address."""

    def __init__(self, mode, size, cfg=None):
        args = [sys.executable, os.path.join(HERE, "peer.py"), mode,
                str(size)]
        if cfg is not None:
            args.append(json.dumps(cfg))
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env=env)
        hello = self._read()
        self.name, self.addr, self.len = (hello["name"], hello["addr"],
                                          hello["len"])

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"peer exited ({self.proc.poll()})")
        return json.loads(line)

    def call(self, op, **args):
        self.proc.stdin.write(json.dumps(dict(args, op=op)) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def fill(self, seed, off, n):
        self.call("fill", seed=seed, off=off, len=n)

    def check(self, seed, off, n):
        r = self.call("check", seed=seed, off=off, len=n)
        assert r["ok"], f"peer bytes differ from offset {r.get('first_bad')}"

    def digest(self, off, n):
        """sha256 of the peer's bytes at [off, off+n)."""
        return self.call("digest", off=off, len=n)["digest"]

    def stop(self):
        """SIGSTOP, and wait until every thread of the peer is stopped."""
        self.proc.send_signal(signal.SIGSTOP)
        tasks = f"/proc/{self.proc.pid}/task"
        for _ in range(1000):
            states = []
            for t in os.listdir(tasks):
                with open(f"{tasks}/{t}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            if all(s in "tT" for s in states):
                return
            time.sleep(0.005)
        raise TimeoutError("the peer does not stop")

    def cont(self):
        self.proc.send_signal(signal.SIGCONT)

    def close(self):
        if self.proc.poll() is None:
            self.cont()
            try:
                self.call("quit")
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


@pytest.fixture
def make_peer():
    peers = []

    def make(mode="native", size=40 * MiB, cfg=None):
        p = Peer(mode, size, cfg)
        peers.append(p)
        return p
    yield make
    for p in peers:
        p.close()


def build_tool(name):
    path = os.path.join(BUILD, name)
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (make)")
    return path


@pytest.fixture
def dead_session():
    """A host:port where nothing listens."""
    return f"127.0.0.1:{free_port()}"


def make_venv(path):
    """A venv that sees Debian's packages (python3-pip among them) and
    reaches no package index: (its python, the environment to run it
    with)."""
    import venv
    venv.create(path, system_site_packages=True, with_pip=False)
    env = dict(os.environ, VIRTUAL_ENV=str(path), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    return str(path / "bin" / "python"), env


def pip_install(py, env, *args, cwd, check=True):
    """The system's pip (python3-pip) installing into py's venv."""
    return subprocess.run([py, "-m", "pip", "install", "--no-build-isolation",
                           *args], check=check, env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """A venv with xfer and xfer-mooncake installed by pip from python/
    and python/mooncake-compat, offline, as the docs say: (python, env,
    a folder outside the tree to run in)."""
    tmp = tmp_path_factory.mktemp("installed")
    py, env = make_venv(tmp / "venv")
    pip_install(py, env, "-q", os.path.join(ROOT, "python"),
                os.path.join(ROOT, "python", "mooncake-compat"), cwd=tmp)
    return py, env, tmp


class Master:
    """build/xfer-stored on 127.0.0.1 (a free port unless given), serving
    once made: .addr is its host:port."""

    def __init__(self, *flags, port=None):
        self.port = port or free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [build_tool("xfer-stored"), f"--port={self.port}",
             "--rpc_address=127.0.0.1", "--metrics_port=0", *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(1000):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"xfer-stored exited: {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.01)
        self.kill()
        raise TimeoutError("xfer-stored does not serve")

    def stop(self):
        """SIGTERM: it exits 0."""
        self.proc.terminate()
        assert self.proc.wait(timeout=10) == 0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def make_master():
    masters = []

    def make(*flags, port=None):
        m = Master(*flags, port=port)
        masters.append(m)
        return m
    yield make
    for m in masters:
        m.kill()
