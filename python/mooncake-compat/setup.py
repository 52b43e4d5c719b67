"""Build of xfer-mooncake: pure Python, the `mooncake` package.

Mooncake's wheel (mooncake-transfer-engine, and its -cuda13, -npu, -efa
... variants) installs a `mooncake` package too; pip would write one over
the other's files without a word. So the build refuses when the
interpreter building it (the one pip installs into, with
--no-build-isolation) already has such a package from another
distribution.
"""
import sys
from importlib import metadata

from setuptools import setup

OURS = "xfer-mooncake"


def _norm(name):
    return (name or "").lower().replace("_", "-").replace(".", "-")


def mooncake_owner():
    """The installed distribution other than ours that provides a
    `mooncake` package, as "name version", or None."""
    for dist in metadata.distributions():
        name = _norm(dist.metadata["Name"])
        if name == OURS:
            continue
        files = dist.files or []
        if name.startswith("mooncake-transfer-engine") or any(
                f.parts[:1] == ("mooncake",) for f in files):
            return f"{dist.metadata['Name']} {dist.version}"
    return None


owner = mooncake_owner()
if owner:
    sys.exit(f"xfer-mooncake: refusing to install: Mooncake's own wheel "
             f"({owner}) is installed here and owns the `mooncake` package; "
             f"the two would overwrite each other's files. Uninstall it "
             f"first (pip uninstall {owner.split()[0]}), or install "
             f"xfer-mooncake into another virtual environment.")

setup(packages=["mooncake"])
