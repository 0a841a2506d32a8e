"""mindstudio_monitor wheel: the IPCMonitor and msmonitor packages with lib64/IPCMonitor_C.so
and lib64/libmsmonitor.so, built by CMake from this repository (no Python dependencies, no
network). `pip wheel --no-deps --no-build-isolation .` or `pip install .`; set
MSMON_WHEEL_BUILD_DIR to reuse an existing CMake build directory."""
import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


def _plugin_version():
    """The plugin version is written once, in CMakeLists.txt (MSMON_PLUGIN_VERSION)."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r'set\(MSMON_PLUGIN_VERSION "([^"]+)"', f.read())
    return m.group(1) if m else "0"


VERSION = os.environ.get("MSMON_PLUGIN_VERSION") or _plugin_version()
PACKAGES = ["IPCMonitor", "msmonitor"]
# Keep setuptools' scratch out of the CMake build tree; one per interpreter, since
# scripts/package.sh builds a wheel for every CPython on the machine.
SCRATCH = os.path.join(ROOT, "build-wheel", "cp%d%d" % sys.version_info[:2])


class BinaryDistribution(Distribution):
    """Carries native code: the wheel gets the cpXY-cpXY-linux_<arch> tags."""

    def has_ext_modules(self):
        return True


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        bdir = os.environ.get("MSMON_WHEEL_BUILD_DIR") or os.path.join(SCRATCH, "cmake")
        if not os.path.exists(os.path.join(bdir, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", bdir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                                   f"-DMSMON_PYTHON={sys.executable}",
                                   f"-DMSMON_PLUGIN_VERSION={VERSION}"])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.check_call(["cmake", "--build", bdir, "-j", jobs, "--target", "IPCMonitor_C", "msmonitor",
                               "msmon_py_contract"])
        ext = os.path.join(bdir, "python", "ext", "IPCMonitor_C.so")
        core = os.path.join(bdir, "src", "plugin", "libmsmonitor.so")
        for pkg in PACKAGES:
            lib64 = os.path.join(self.build_lib, pkg, "lib64")
            os.makedirs(lib64, exist_ok=True)
            shutil.copy2(ext, os.path.join(lib64, "IPCMonitor_C.so"))
            shutil.copy2(core, os.path.join(lib64, "libmsmonitor.so"))
            # the contract tables as Python, generated from src/contract/ (python/CMakeLists.txt)
            shutil.copy2(os.path.join(bdir, "python", "_contract.py"), os.path.join(self.build_lib, pkg, "_contract.py"))


os.makedirs(SCRATCH, exist_ok=True)
setup(
    name="mindstudio_monitor",
    version=VERSION,
    description="msMonitor in-process plugin: dynolog IPC, npu-monitor sessions, standalone Monitor API",
    license="Apache-2.0",
    python_requires=">=3.8",
    # IPCMonitor (imported by torch_npu/MindSpore) and msmonitor are the same sources
    package_dir={"": "python", "IPCMonitor": "python/msmonitor"},
    packages=PACKAGES,
    install_requires=[],
    zip_safe=False,
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildWithCMake},
    options={
        "build": {"build_base": SCRATCH},
        "egg_info": {"egg_base": SCRATCH},
    },
)
