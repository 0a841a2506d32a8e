"""Helpers for the Python-package end-to-end tests: where the built packages and the
simulator live, an environment for processes that import them, and a runner for small
Python scripts in a fresh interpreter (the plugin keeps process-wide state, so every
scenario gets its own process)."""
import json
import os
import subprocess
import sys
import tempfile

import pytest

from conftest import BUILD, SOURCE
from waits import wait_polling  # noqa: F401 (re-exported for the tests that import it from here)

PYTHON = os.environ.get("MSMON_PYTHON", "/usr/bin/python3")
PKG = os.path.join(BUILD, "python", "pkg")
SIM_LIB = os.path.join(BUILD, "src", "sim", "libmspti.so")


def require_packages():
    """Skip when the extension or the simulator is not built in this tree."""
    for p in (os.path.join(PKG, "msmonitor", "lib64", "IPCMonitor_C.so"), SIM_LIB):
        if not os.path.exists(p):
            pytest.skip(f"{p} not built")


def py_env(base=None, **extra):
    """Environment importing the build-tree packages, using the simulator as msPTI, with a
    private shm directory unless one is given."""
    env = dict(base if base is not None else os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PKG, env.get("PYTHONPATH")) if p)
    env["MSMONITOR_MSPTI_LIB"] = SIM_LIB
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_py(code, env=None, cwd=None, timeout=60):
    """Run `code` with the build-tree packages; returns CompletedProcess (text)."""
    cwd = cwd or tempfile.mkdtemp(prefix="mmpy")
    return subprocess.run([PYTHON, "-c", code], env=env or py_env(), cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def last_json(stdout):
    """The last line of stdout that parses as JSON (scripts print their result last)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") or line.startswith("["):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise AssertionError(f"no JSON line in output:\n{stdout[-3000:]}")


def read_dump(path):
    """The simulator's ground truth: one JSON object per appended record."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def children_of(ppid):
    """Pids whose parent is ppid (a launcher's ranks)."""
    kids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                    kids.append(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    return kids


__all__ = ["BUILD", "SOURCE", "PYTHON", "PKG", "SIM_LIB", "sys", "require_packages", "py_env",
           "run_py", "last_json", "read_dump", "wait_polling", "children_of"]
