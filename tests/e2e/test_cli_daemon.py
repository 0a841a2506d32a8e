"""dyno against the real dynolog (conftest.Daemon): status, version, the local `unix:`
target through dyno.sock, and npu-monitor with no registered process."""
import json
import os

import pytest

from conftest import Daemon, binpath, run_dyno

ROOT_WARN = ("Security Warning: Do not run this tool as root. Running with elevated privileges "
             "may compromise system security. Use a regular user account.")


def lines(out):
    return [l for l in out.split("\n") if l != ROOT_WARN]


@pytest.fixture
def dyn():
    try:
        binpath("dynolog")
    except FileNotFoundError:
        pytest.skip("dynolog not built")
    d = Daemon()
    yield d
    d.stop()


def test_status(dyn):
    r = run_dyno(dyn, "status")
    assert r.returncode == 0, r.stderr
    out = lines(r.stdout)
    assert out[0] == "Running in no-certificate mode"
    st = json.loads(out[1])
    assert st["npumonitor"] in ("Uninitialized", "Idle")
    assert st["current_step"] == -1
    assert st["processes"] == []
    dyn.wait_log('RPC message received = {"fn":"getStatus"}')


def test_version(dyn):
    r = run_dyno(dyn, "version")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(os.environ.get("MSMON_SOURCE_DIR", os.path.join(
            os.path.dirname(__file__), "..", "..")), "VERSION")) as f:
        version = f.read().strip()
    assert lines(r.stdout)[1] == '{"version":"%s"}' % version


def test_unix_target(dyn):
    assert os.path.exists(dyn.sock("dyno.sock"))
    r = run_dyno(dyn, "version", hostname="unix:")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(lines(r.stdout)[1])["version"]
    r = run_dyno(dyn, "status", hostname="unix:" + dyn.sock("dyno.sock"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "processes" in json.loads(lines(r.stdout)[1])


def test_npu_monitor_without_process(dyn):
    r = run_dyno(dyn, "npu-monitor", "--npu-monitor-start")
    assert r.returncode == 5, r.stderr   # reached no process (docs/cli.md#exit-codes)
    out = lines(r.stdout)
    assert 'response = {"commandStatus":"ineffective"}' in out
    assert out[-2].startswith("Note: command not applied (ineffective); ")
    dyn.wait_log("RPC message received = ")


def test_mixed_targets_one_down(dyn):
    r = run_dyno(dyn, "version", hostname="localhost,unix:,unix:/nonexistent/dyno.sock")
    assert r.returncode == 1
    out = lines(r.stdout)
    assert out[1].startswith('[localhost] {"version":')
    assert out[2].startswith('[unix:] {"version":')
    assert out[3].startswith("[unix:/nonexistent/dyno.sock] ERROR: Couldn't connect to the server...: ")
    assert out[4] == "Summary: 3 hosts, 2 succeeded, 1 failed"
