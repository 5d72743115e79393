"""Builds the C library and the launchers with CMake, then installs one merged `hvdsparse` package
(frameworks/common + frameworks/pytorch + frameworks/tensorflow) with the library and the native
launchers inside it (hvdsparse/libhvdsparse.so, hvdsparse/bin/), the `hvdsparse` and
`horovodrun` commands in <prefix>/bin (entry points of pyproject.toml that run those launchers)
and the opt-in Horovod alias in <prefix>/share/hvdsparse/alias (docs/launching.md).

`pip install -e .` links the Python sources instead of copying them; the library and the
launchers are then copied next to them (frameworks/common/hvdsparse/), where the loader and the
commands look.
The wheel is tagged for this platform (py3-none-<platform>): it carries a native library but no
Python extension, so any Python 3 of that platform loads it.

The device library (libhvdsparse_device.so: the CUDA kernels and the NCCL backend) is not built
here; the runtime loads one on demand, from HVDSPARSE_DEVICE_LIBRARY or beside the library
(docs/gpu.md)."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))
CMAKE_BUILD = os.path.join(ROOT, "build", "pip")
LAUNCHERS = ("hvdsparse", "horovodrun")


def packages():
    dirs = {"hvdsparse": "frameworks/common/hvdsparse",
            "hvdsparse.common": "frameworks/common/hvdsparse/common",
            "hvdsparse.torch": "frameworks/pytorch/hvdsparse/torch",
            "hvdsparse.tensorflow": "frameworks/tensorflow/hvdsparse/tensorflow"}
    found = {k: v for k, v in dirs.items() if os.path.isfile(os.path.join(ROOT, v, "__init__.py"))}
    # Subpackages of the framework packages (e.g. hvdsparse.tensorflow.keras).
    for name, path in list(found.items()):
        for sub, _, files in os.walk(os.path.join(ROOT, path)):
            rel = os.path.relpath(sub, os.path.join(ROOT, path))
            if rel != "." and "__init__.py" in files:
                found[name + "." + rel.replace(os.sep, ".")] = os.path.join(path, rel)
    return found


def alias_files():
    out = []
    base = os.path.join(ROOT, "frameworks", "alias")
    for sub, _, files in os.walk(base):
        py = [os.path.relpath(os.path.join(sub, f), ROOT) for f in files if f.endswith(".py")]
        if py:
            out.append((os.path.join("share", "hvdsparse", "alias", os.path.relpath(sub, base)), py))
    return out


def build_native():
    """Configures and builds the library and both launchers in CMAKE_BUILD (incremental)."""
    jobs = str(os.cpu_count() or 1)
    subprocess.check_call(["cmake", "-S", ROOT, "-B", CMAKE_BUILD, "-DHVDS_ENABLE_TESTS=OFF",
                           "-DHVDS_ENABLE_CUDA=OFF", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
    subprocess.check_call(["cmake", "--build", CMAKE_BUILD, "-j", jobs, "--target",
                           "hvdsparse_lib", "hvdsparse_cli", "horovodrun_cli"])


class BuildWithCMake(build_py):
    """Runs CMake before copying the Python files, then puts the library and the launchers inside
    the package: in the build tree for a wheel, next to the sources for an editable install."""

    def run(self):
        build_native()
        super().run()
        if getattr(self, "editable_mode", False):
            target = os.path.join(ROOT, packages()["hvdsparse"])
        else:
            target = os.path.join(self.build_lib, "hvdsparse")
        os.makedirs(os.path.join(target, "bin"), exist_ok=True)
        shutil.copy2(os.path.join(CMAKE_BUILD, "lib", "libhvdsparse.so"), target)
        for name in LAUNCHERS:
            shutil.copy2(os.path.join(CMAKE_BUILD, "bin", name), os.path.join(target, "bin"))


class PlatformWheel(bdist_wheel):
    """A wheel for this platform and any Python 3: the library is native, the Python is not."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


pkgs = packages()
setup(
    packages=sorted(pkgs),
    package_dir=pkgs,
    cmdclass={"build_py": BuildWithCMake, "bdist_wheel": PlatformWheel},
    # setuptools' own build tree, inside CMake's (not next to `make build`'s lib/ and bin/).
    options={"build": {"build_base": os.path.join("build", "pip", "setuptools")}},
    data_files=alias_files(),
)
