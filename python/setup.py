"""Build of xfer._xfer, the C extension module, against libxfer.

Its flags come from pkg-config's xfer package (mk/xfer.pc.in), as any
program of libxfer's would get them: from this repository's build
(build/pkgconfig/xfer.pc, which make writes, the library brought up to
date first) when setup.py runs from the repository, else from an
installed xfer (make install). libxfer.a is linked in statically, so the
installed module needs no LD_LIBRARY_PATH: its Requires.private (the
library's own dependencies, which pkg-config --libs leaves out for a
shared libxfer) are linked in their place. Overrides, from the
environment: XFER_ROOT (the repository), XFER_LIBXFER (a libxfer.a, with
XFER_PC_DIR the folder of its xfer.pc: make python gives both),
PKG_CONFIG_PATH.
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("XFER_ROOT", os.path.dirname(HERE))
IN_TREE = os.path.exists(os.path.join(ROOT, "mk", "xfer.pc.in"))
PC_DIR = os.environ.get("XFER_PC_DIR",
                        os.path.join(ROOT, "build", "pkgconfig"))

if IN_TREE and "XFER_LIBXFER" not in os.environ:  # the repository's
    subprocess.run(["make", "-s", "-C", ROOT, "python-lib"], check=True)
if os.path.isdir(PC_DIR):
    os.environ["PKG_CONFIG_PATH"] = os.pathsep.join(
        p for p in (PC_DIR, os.environ.get("PKG_CONFIG_PATH")) if p)


def pkg_config(*args):
    out = subprocess.run(["pkg-config", *args], check=True,
                         capture_output=True, text=True).stdout
    return shlex.split(out)


LIBXFER = os.environ.get("XFER_LIBXFER", os.path.join(
    pkg_config("--variable=libdir", "xfer")[0], "libxfer.a"))
DEPS = pkg_config("--print-requires-private", "xfer")

# The module's own files; the engine's are the library's.
SOURCES = sorted(os.path.join("src", f) for f in os.listdir(
    os.path.join(HERE, "src")) if f.endswith(".c"))

CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
          "-fvisibility=hidden", "-pthread"]
if os.environ.get("XFER_WERROR") == "1":  # make's WERROR
    CFLAGS.append("-Werror")

xfer_ext = Extension(
    "xfer._xfer",
    sources=SOURCES,
    depends=[os.path.join("src", "xfer_py.h")],
    extra_compile_args=CFLAGS + pkg_config("--cflags", "xfer"),
    extra_objects=[LIBXFER],
    # libxfer's symbols stay inside the module
    extra_link_args=["-Wl,--exclude-libs,ALL", "-pthread"] +
    (pkg_config("--libs", *DEPS) if DEPS else []),
)

setup(packages=["xfer", "xfer.mooncake"], ext_modules=[xfer_ext])
