"""Build of xfer._xfer, the C extension module, against libxfer.

libxfer comes from this repository's build/ (brought up to date with make
first) and is linked in statically, so the installed module needs no
LD_LIBRARY_PATH; its own dependencies come from pkg-config, the same list
the library's Makefile uses (mk/config.mk). Overrides, from the
environment: XFER_ROOT (the repository), XFER_LIBXFER (a libxfer.a).
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("XFER_ROOT", os.path.dirname(HERE))
LIBXFER = os.environ.get("XFER_LIBXFER",
                         os.path.join(ROOT, "build", "libxfer.a"))


def pkg_config_packages():
    """The PKGS of mk/config.mk (they follow the optional parts): from
    make itself, or XFER_PKGS when make passes them."""
    pkgs = os.environ.get("XFER_PKGS")
    if pkgs is None:
        pkgs = subprocess.run(["make", "-s", "--no-print-directory", "-C",
                               ROOT, "pkgs"], check=True,
                              capture_output=True, text=True).stdout
    return pkgs.split()


def pkg_config(*args):
    out = subprocess.run(["pkg-config", *args, *pkg_config_packages()],
                         check=True, capture_output=True, text=True).stdout
    return shlex.split(out)


if "XFER_LIBXFER" not in os.environ:  # the repository's, up to date
    subprocess.run(["make", "-s", "-C", ROOT, "build/libxfer.a"], check=True)

# The engine's files are the library's; only the module's own go here.
SOURCES = sorted(os.path.join("src", f) for f in os.listdir(
    os.path.join(HERE, "src")) if f.endswith(".c"))

CFLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
          "-fvisibility=hidden"]
if os.environ.get("XFER_WERROR") == "1":  # make's WERROR
    CFLAGS.append("-Werror")

xfer_ext = Extension(
    "xfer._xfer",
    sources=SOURCES,
    include_dirs=[ROOT, os.path.join(ROOT, "include")],
    depends=[os.path.join("src", "xfer_py.h")],
    extra_compile_args=CFLAGS + pkg_config("--cflags"),
    extra_objects=[LIBXFER],
    # libxfer's symbols stay inside the module
    extra_link_args=["-Wl,--exclude-libs,ALL"] + pkg_config("--libs"),
)

setup(packages=["xfer"], ext_modules=[xfer_ext])
