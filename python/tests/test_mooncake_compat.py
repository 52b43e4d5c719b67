"""The `mooncake` package of xfer-mooncake (python/mooncake-compat):
programs written for Mooncake (apps/mooncake_kv.py for the transfer
engine, apps/mooncake_store_kv.py for the store, both unmodified) run
where only xfer and xfer-mooncake are installed; installing beside
Mooncake's own wheel is refused, and meeting it on sys.path fails on
import with the reason."""
import os
import pathlib
import shutil
import subprocess

from conftest import HERE, ROOT, make_venv, pip_install

COMPAT = os.path.join(ROOT, "python", "mooncake-compat")


def run(py, env, cwd, *args):
    return subprocess.run([py, *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_unmodified_mooncake_program(installed, tmp_path):
    py, env, _ = installed
    app = shutil.copy(os.path.join(HERE, "apps", "mooncake_kv.py"), tmp_path)
    r = run(py, env, tmp_path, app)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "done"
    assert "transfer_submit_write ok" in lines
    assert "store available" in lines
    # the modules came from the venv, not from the tree
    r = run(py, env, tmp_path, "-c",
            "import mooncake.engine, xfer; "
            "print(mooncake.engine.__file__); print(xfer.__file__)")
    assert all(p.startswith(env["VIRTUAL_ENV"])
               for p in r.stdout.split()), r.stdout


def fake_mooncake_wheel(site):
    """What Mooncake's wheel leaves in site-packages, as far as a check
    can see: its dist-info and its `mooncake` package with engine.so."""
    pkg = site / "mooncake"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "engine.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    info = site / "mooncake_transfer_engine-0.3.12.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\n"
                                   "Name: mooncake-transfer-engine\n"
                                   "Version: 0.3.12\n")
    (info / "RECORD").write_text(
        "mooncake/__init__.py,,\n"
        "mooncake/engine.cpython-311-x86_64-linux-gnu.so,,\n")


def test_install_beside_mooncake_wheel_refused(tmp_path):
    py, env = make_venv(tmp_path / "venv")
    site = subprocess.run([py, "-c", "import site; "
                           "print(site.getsitepackages()[0])"], env=env,
                          capture_output=True, text=True,
                          check=True).stdout.strip()
    site = pathlib.Path(site)
    fake_mooncake_wheel(site)
    r = pip_install(py, env, "--no-deps", COMPAT, cwd=tmp_path, check=False)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "refusing to install" in out
    assert "mooncake-transfer-engine 0.3.12" in out
    # Mooncake's files are untouched
    assert sorted(os.listdir(site / "mooncake")) == [
        "__init__.py", "engine.cpython-311-x86_64-linux-gnu.so"]
    assert (site / "mooncake" / "__init__.py").read_text() == ""


def test_import_beside_mooncake_wheel_fails(installed, tmp_path):
    py, env, _ = installed
    theirs, mixed = tmp_path / "theirs", tmp_path / "mixed"
    theirs.mkdir()
    # Mooncake's wheel elsewhere on sys.path, after xfer-mooncake
    fake_mooncake_wheel(theirs)
    r = run(py, env, tmp_path, "-c", "import sys; sys.path.append(sys.argv[1]);"
            " import mooncake.engine", str(theirs))
    assert r.returncode != 0
    assert "are both installed" in r.stderr
    assert str(theirs / "mooncake" / "engine.") in r.stderr
    # or one installed over the other, in one folder
    r = run(py, env, tmp_path, "-c",
            "import os, mooncake; print(os.path.dirname(mooncake.__file__))")
    shutil.copytree(r.stdout.strip(), mixed / "mooncake")
    (mixed / "mooncake" / "store.cpython-311-x86_64-linux-gnu.so").write_bytes(
        b"")
    r = run(py, env, mixed, "-c", "import mooncake")
    assert r.returncode != 0
    assert "are both installed" in r.stderr


def test_unmodified_mooncake_store_program(installed, tmp_path,
                                           make_master):
    py, env, _ = installed
    master = make_master()
    app = shutil.copy(os.path.join(HERE, "apps", "mooncake_store_kv.py"),
                      tmp_path)
    r = run(py, dict(env, MOONCAKE_MASTER=master.addr), tmp_path, app)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "setup ok 0", "warmup ok", "batch_put_from / batch_get_into ok",
        "multi buffers ok", "put_parts / batch_get_buffer ok", "async ok",
        "done"]
    r = run(py, env, tmp_path, "-c",
            "import mooncake.store, mooncake.async_store, xfer.mooncake.store;"
            " print(mooncake.store.__file__);"
            " print(mooncake.async_store.__file__);"
            " print(xfer.mooncake.store.__file__)")
    assert r.returncode == 0, r.stderr
    assert all(p.startswith(env["VIRTUAL_ENV"])
               for p in r.stdout.split()), r.stdout
