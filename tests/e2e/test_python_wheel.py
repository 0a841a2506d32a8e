"""The mindstudio_monitor wheel builds offline from the repository (pip wheel --no-deps
--no-build-isolation, reusing this build tree) and its packages work once installed."""
import glob
import os
import platform
import subprocess
import sys

import pytest

from conftest import BUILD, SOURCE
from python_util import PYTHON, require_packages


def test_wheel_builds_offline_and_imports(tmp_path):
    require_packages()
    probe = subprocess.run([PYTHON, "-c", "import setuptools, wheel, pip"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("setuptools/wheel/pip not available for " + PYTHON)
    env = dict(os.environ, MSMON_WHEEL_BUILD_DIR=BUILD, PIP_NO_INDEX="1")
    r = subprocess.run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                        str(tmp_path / "dist"), SOURCE], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}" if PYTHON == sys.executable else None
    wheels = glob.glob(str(tmp_path / "dist" / "mindstudio_monitor-*.whl"))
    assert len(wheels) == 1
    name = os.path.basename(wheels[0])
    arch = platform.machine()
    assert name.startswith("mindstudio_monitor-26.0.0-cp") and name.endswith(f"-linux_{arch}.whl"), name
    if tag:
        assert f"-{tag}-{tag}-" in name
    target = tmp_path / "site"
    r = subprocess.run([PYTHON, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                        wheels[0]], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for pkg in ("IPCMonitor", "msmonitor"):
        for f in ("IPCMonitor_C.so", "libmsmonitor.so"):
            assert (target / pkg / "lib64" / f).exists()
    assert (target / "msmonitor" / "dynamic_profile.py").exists()
    for pkg in ("IPCMonitor", "msmonitor"):  # generated at build time, never in the source tree
        assert (target / pkg / "_contract.py").exists()
    r = subprocess.run([PYTHON, "-c", "from IPCMonitor import PyDynamicMonitorProxy, Monitor, ActivityKind; "
                        "import msmonitor; print(ActivityKind.Kernel.value, msmonitor.PyDynamicMonitorProxy.poll_dyno() == '')"],
                       env=dict(os.environ, PYTHONPATH=str(target), MSMONITOR_SOCKET_DIR=str(tmp_path)),
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "True"]
