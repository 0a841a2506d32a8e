"""scripts/gpu-check.sh as far as a machine without an NVIDIA GPU allows: its argument
handling, and a clear FAIL line plus summary (nothing built or started) when no GPU is there."""
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import SOURCE

SCRIPT = os.path.join(SOURCE, "scripts", "gpu-check.sh")


def _run(*args, env=None, unset=()):
    e = dict(os.environ)
    if env:
        e.update(env)
    for k in unset:
        e.pop(k, None)
    return subprocess.run(["bash", SCRIPT, *args], env=e, capture_output=True, text=True, timeout=60)


def test_help_and_bad_arguments():
    r = _run("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: ") and "--build-dir" in r.stdout
    r = _run("--frobnicate")
    assert r.returncode == 2 and "gpu-check: unknown option '--frobnicate' (see --help)" in r.stderr
    for bad in ("abc", "0", "10001", ""):
        r = _run("--steps", bad)
        assert r.returncode == 2 and f"gpu-check: --steps '{bad}' is not a number in 1..10000" in r.stderr
    r = _run("--build-dir")
    assert r.returncode == 2 and "--build-dir needs a directory" in r.stderr


def _path_without_nvidia_smi(tmp):
    """PATH whose directories hold no nvidia-smi (mirrors of the real ones without it)."""
    dirs = []
    for i, d in enumerate(os.environ.get("PATH", "/usr/bin:/bin").split(":")):
        if not d or not os.path.isdir(d):
            continue
        if not os.path.exists(os.path.join(d, "nvidia-smi")):
            dirs.append(d)
            continue
        m = os.path.join(tmp, f"p{i}")
        os.mkdir(m)
        for n in os.listdir(d):
            if n != "nvidia-smi":
                os.symlink(os.path.join(d, n), os.path.join(m, n))
        dirs.append(m)
    return ":".join(dirs)


def test_no_gpu_clear_failure():
    tmp = tempfile.mkdtemp(prefix="mmg")
    build = os.path.join(tmp, "build")
    r = _run("--build-dir", build, env={"PATH": _path_without_nvidia_smi(tmp)})
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("FAIL gpu: no NVIDIA GPU: nvidia-smi not found (this check needs a machine "
                        "with an NVIDIA GPU and driver)")
    assert lines[-1] == "SUMMARY: 0 passed, 1 failed (no GPU: nothing else was run)"
    assert not os.path.exists(build)  # nothing was built


def test_driver_without_devices():
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        if "GPU " in out:
            pytest.skip("a real GPU is present")
    tmp = tempfile.mkdtemp(prefix="mmg")
    fake = os.path.join(tmp, "fakebin")
    os.mkdir(fake)
    smi = os.path.join(fake, "nvidia-smi")
    with open(smi, "w") as f:
        f.write("#!/bin/sh\necho 'No devices were found' >&2\nexit 6\n")
    os.chmod(smi, stat.S_IRWXU)
    r = _run("--no-build", env={"PATH": fake + ":" + os.environ.get("PATH", "/usr/bin:/bin")})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL gpu: no NVIDIA GPU: nvidia-smi -L lists no device" in r.stdout
    assert r.stdout.splitlines()[-1] == "SUMMARY: 0 passed, 1 failed (no GPU: nothing else was run)"


def test_flow_up_to_the_device():
    """With nvcc here but no device behind a fake nvidia-smi: the toolkit is found, the CUDA
    program compiles, the daemon starts, and each run fails at registration, naming why."""
    from conftest import BUILD
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        pytest.skip("no nvcc on this machine")
    if shutil.which("nvidia-smi"):
        pytest.skip("a real nvidia-smi is present")
    tmp = tempfile.mkdtemp(prefix="mmg")
    fake = os.path.join(tmp, "fakebin")
    os.mkdir(fake)
    smi = os.path.join(fake, "nvidia-smi")
    with open(smi, "w") as f:
        f.write("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n")
    os.chmod(smi, stat.S_IRWXU)
    path = fake + ":" + os.environ.get("PATH", "/usr/bin:/bin") + ":" + os.path.dirname(nvcc)
    # Without the ASan tree's runtime preload: nvcc itself crashes under it, and on a GPU
    # machine the script runs in a plain environment anyway.
    r = _run("--no-build", "--build-dir", BUILD, "--steps", "2", env={"PATH": path}, unset=("LD_PRELOAD",))
    out = r.stdout
    work = [ln.split(": ", 1)[1] for ln in out.splitlines() if ln.startswith("work directory: ")]
    for w in work:
        shutil.rmtree(w, ignore_errors=True)
    assert r.returncode == 1, out + r.stderr
    for line in ("PASS gpu (1 device(s): GPU 0: Fake GPU (UUID: GPU-0))", "PASS nvcc app"):
        assert line in out.splitlines(), out
    assert any(ln.startswith("PASS toolkit (nvcc ") for ln in out.splitlines()), out
    assert any(ln.startswith("PASS daemon (port ") for ln in out.splitlines()), out
    assert "FAIL metric register: the injected app did not register (app: no CUDA device" in out, out
    assert "FAIL nputrace register: the injected app did not register (app: no CUDA device" in out, out
    assert out.splitlines()[-2].startswith("SUMMARY: 4 passed, 3 failed"), out


def test_check_trace_arguments_and_missing_trace(tmp_path):
    """--check-trace needs no GPU: bad arguments are refused, a directory without a trace fails."""
    r = _run("--check-trace", str(tmp_path), "3")
    assert r.returncode == 2 and "gpu-check: --check-trace needs DIR START STOP NAME=COUNT[,...] MEMCPYS" in r.stderr
    r = _run("--check-trace", str(tmp_path), "x", "5", "k=1", "2")
    assert r.returncode == 2 and "gpu-check: --check-trace: 'x' is not a number" in r.stderr
    r = _run("--check-trace", str(tmp_path), "3", "5", "k=1", "2")
    assert r.returncode == 1
    assert r.stdout.splitlines() == [f"FAIL nputrace file: 0 trace files in {tmp_path} (expected 1)",
                                     "SUMMARY: 0 passed, 1 failed"]
