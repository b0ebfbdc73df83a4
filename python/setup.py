"""Builds gpurt._native against an installed libgpurt.

The library is found through pkg-config (``gpurt.pc``; set PKG_CONFIG_PATH for
a prefix of your own) or GPURT_PREFIX. The static ``libgpurt.a`` is linked in
when it is installed, so the package does not depend on the library at run
time; otherwise the extension links ``libgpurt.so`` with an rpath to it.
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "gpurt"], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def library():
    prefix = os.environ.get("GPURT_PREFIX")
    if prefix:
        libdirs = [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu") if os.path.isdir(os.path.join(prefix, d))]
        return os.path.join(prefix, "include"), os.path.join(prefix, libdirs[0] if libdirs else "lib")
    incdir, libdir = pkg_config("--variable=includedir"), pkg_config("--variable=libdir")
    if not incdir or not libdir:
        raise SystemExit("gpurt: libgpurt not found: install it (cmake --install BUILD) and make "
                         "pkg-config find gpurt.pc (PKG_CONFIG_PATH), or set GPURT_PREFIX")
    return incdir, libdir


incdir, libdir = library()
static = os.path.join(libdir, "libgpurt.a")
link = {}
if os.path.exists(static):
    link = {"extra_objects": [static], "libraries": ["pthread", "m", "dl"],
            "extra_link_args": ["-Wl,--exclude-libs,ALL"]}
else:
    link = {"libraries": ["gpurt"], "library_dirs": [libdir], "runtime_library_dirs": [libdir]}

headers = [os.path.join(incdir, "gpurt", h) for h in ("base.h", "doctor.h", "replay.h", "trace.h", "alloc.h")]
native = Extension(
    "gpurt._native",
    # a new library relinks the extension (setuptools looks only at these for that)
    depends=[static if os.path.exists(static) else os.path.join(libdir, "libgpurt.so"), "src/native.h"] + headers,
    sources=["src/native.c", "src/native_replay.c", "src/native_alloc.c"],
    include_dirs=[incdir],
    define_macros=[("GPURT_LIBDIR", '"%s"' % libdir.replace('"', '\\"'))],
    # the project's warnings; CI (CI set) makes them errors, as for the library
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Wstrict-prototypes",
                        "-Wmissing-prototypes"] + (["-Werror"] if os.environ.get("CI") else [])
    + shlex.split(os.environ.get("GPURT_EXTRA_CFLAGS", "")),
    **link,
)

setup(ext_modules=[native])
