"""The package installs as docs/PYTHON.md says: pip install
--no-build-isolation ./python into a venv made with
--system-site-packages, from Debian's packages only (no index), and works
from anywhere once installed."""
import subprocess
import sys

SCRIPT = """
import xfer, xfer.mooncake, os
assert os.path.dirname(xfer.__file__).startswith(os.environ["VIRTUAL_ENV"])
a, b = xfer.mooncake.TransferEngine(), xfer.mooncake.TransferEngine()
assert a.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
assert b.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
src, dst = a.allocate_managed_buffer(4096), b.allocate_managed_buffer(4096)
a.write_bytes_to_buffer(src, b"installed", 9)
assert a.transfer_sync_write(b.engine.name, src, dst, 9) == 0
assert b.read_bytes_from_buffer(dst, 9) == b"installed"
print("ok")
"""


def test_pip_install_into_venv(installed):
    py, env, tmp = installed
    out = subprocess.run([py, "-c", SCRIPT], check=True, env=env,
                         cwd=tmp, capture_output=True, text=True,
                         timeout=60).stdout
    assert out.strip() == "ok"
    assert sys.prefix != env["VIRTUAL_ENV"]
