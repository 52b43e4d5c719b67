"""The package installs as docs/PYTHON.md says: pip install
--no-build-isolation ./python into a venv made with
--system-site-packages, from Debian's packages only (no index), and works
from anywhere once installed."""
import os
import subprocess
import sys
import venv

from conftest import ROOT

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


def test_pip_install_into_venv(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    py = str(env_dir / "bin" / "python")
    env = dict(os.environ, VIRTUAL_ENV=str(env_dir), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    # the system's pip (python3-pip) installs into the venv's interpreter
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation",
                    os.path.join(ROOT, "python")], check=True, env=env,
                   cwd=tmp_path, timeout=300)
    out = subprocess.run([py, "-c", SCRIPT], check=True, env=env,
                         cwd=tmp_path, capture_output=True, text=True,
                         timeout=60).stdout
    assert out.strip() == "ok"
    assert sys.prefix != str(env_dir)
