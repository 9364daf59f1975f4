# client/python/setup.py - puts libspillway.so (and the CUDA plugin, where built) into the package when it is
# built: from $SPILLWAY_LIB when set, else from the repository's build/lib/, first brought up to date with
# `make` there; the wheel is then platform-specific (py3-none-linux_x86_64, for this host alone: `make wheel`
# then bundles the libraries it needs and tags it manylinux, see scripts/dev/bundle_wheel.py). The rest is
# pyproject.toml.
import os
import shutil
import subprocess
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:     # no wheel package: pip install still works (it builds no wheel then)
    bdist_wheel = None

HERE = os.path.dirname(os.path.realpath(__file__))     # through a symlinked checkout too
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def _library():
    """The libspillway.so to bundle, built by the repository's Makefile if need be."""
    env = os.environ.get("SPILLWAY_LIB")
    if env:
        if not os.path.isfile(env):
            raise SystemExit("spillway: SPILLWAY_LIB=%s is not a file" % env)
        return env
    if not os.path.isfile(os.path.join(REPO, "Makefile")):
        raise SystemExit("spillway: no libspillway.so to bundle: set SPILLWAY_LIB to one, or build from the "
                         "Spillway repository (client/python)")
    subprocess.run(["make", "-C", REPO, "-s", "build/lib/libspillway.so"], check=True)
    return os.path.join(REPO, "build", "lib", "libspillway.so")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = _library()
        dest = os.path.join(self.build_lib, "spillway")
        shutil.copyfile(lib, os.path.join(dest, "libspillway.so"))
        plugin = os.path.join(os.path.dirname(os.path.realpath(lib)), "libspillway-gpu.so")
        if os.path.isfile(plugin):
            shutil.copyfile(plugin, os.path.join(dest, "libspillway-gpu.so"))


commands = {"build_py": BuildWithLibrary}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """The wheel carries a shared library: not pure, but Python-version independent (ctypes)."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")

    commands["bdist_wheel"] = PlatformWheel

setup(cmdclass=commands)
