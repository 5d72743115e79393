"""Builds the C library and the launcher with CMake, then installs one merged `hvdsparse` package
(frameworks/common + frameworks/pytorch + frameworks/tensorflow), the library next to it, the
`hvdsparse` launcher in <prefix>/bin and the opt-in Horovod alias in <prefix>/share/hvdsparse."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
CMAKE_BUILD = os.path.join(ROOT, "build", "pip")


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


class BuildWithCMake(build_py):
    """Runs CMake (targets hvdsparse_lib and hvdsparse_cli, tests off) before copying Python files."""

    def run(self):
        jobs = str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "-S", ROOT, "-B", CMAKE_BUILD, "-DHVDS_ENABLE_TESTS=OFF",
                               "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        subprocess.check_call(["cmake", "--build", CMAKE_BUILD, "-j", jobs, "--target",
                               "hvdsparse_lib", "hvdsparse_cli"])
        super().run()
        target = os.path.join(self.build_lib, "hvdsparse")
        os.makedirs(target, exist_ok=True)
        shutil.copy2(os.path.join(CMAKE_BUILD, "lib", "libhvdsparse.so"), target)


pkgs = packages()
setup(
    packages=sorted(pkgs),
    package_dir=pkgs,
    cmdclass={"build_py": BuildWithCMake},
    data_files=[("bin", [os.path.relpath(os.path.join(CMAKE_BUILD, "bin", "hvdsparse"), ROOT)])]
    + alias_files(),
)
