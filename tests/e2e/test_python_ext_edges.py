"""IPCMonitor_C edge cases (docs/design/session.md#python-surface, #standalone-monitor): start_monitor accepts any list of
ActivityKind (repeats dropped), enable_dyno_npu_monitor is immune to a value whose str()
mutates the caller's dict, and poll_dyno releases the GIL while it blocks."""
import json
import os
import socket

import pytest

from python_util import py_env, require_packages, run_py, last_json


@pytest.fixture(autouse=True)
def _built():
    require_packages()


def test_start_monitor_long_list_with_repeats(tmp_path):
    r = run_py("""
import json
from msmonitor import Monitor, ActivityKind as K
m = Monitor()
m.start([K.Kernel] * 100 + [K.Marker] * 3 + [K.Kernel])
from msmonitor.monitor import _mon
kinds = [k.name for k in _mon.get_kinds()]
m.stop()
print(json.dumps({"kinds": kinds, "result": sorted(k.name for k in m.get_result())}))""", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == {"kinds": ["Kernel", "Marker"], "result": ["Kernel", "Marker"]}


def test_enable_config_value_str_mutating_dict(tmp_path):
    """str() of a value clears the caller's dict: the whole config still applies (the session
    starts with its log path) and nothing is read from freed keys."""
    out = tmp_path / "out"
    r = run_py(f"""
from IPCMonitor._ipcmonitor_C import IPCMonitor_C as C
class Evil:
    def __str__(self):
        d.clear()
        return "Kernel"
d = {{}}
d["MSPTI_ACTIVITY_KIND"] = Evil()
d.update({{"REPORT_INTERVAL_S": "1", "DURATION": "0", "NPU_MONITOR_START": "true",
          "NPU_MONITOR_STOP": "false", "NPU_MONITOR_LOG_FILE": {str(out)!r}, "NPU_MONITOR_EXPORT_TYPE": "DB"}})
C.enable_dyno_npu_monitor(d)
C.finalize_dyno()
print("done", len(d))""", env=py_env(MSMONITOR_SOCKET_DIR=str(tmp_path / "nosock")), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("done 0")
    logs = "".join(p.read_text() for p in (tmp_path / "msmonitor_log").glob("*.log"))
    assert "Missing required key" not in logs, logs
    assert "MsptiMonitor start successfully" in logs and out.is_dir(), logs


def test_poll_dyno_releases_gil(tmp_path):
    """A socket file nobody listens on makes every send retry with back-off (ECONNREFUSED).
    A second thread must observe the polling thread asleep inside the C call (not waiting
    for the GIL), which it can only do if the call released the GIL."""
    home = tmp_path / "sock"
    home.mkdir()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(home / "dynolog.sock"))
    s.close()   # the file stays: connect/send now fail with ECONNREFUSED
    r = run_py("""
import json, os, platform, threading
from IPCMonitor._ipcmonitor_C import IPCMonitor_C as C
FUTEX = {"x86_64": 202, "aarch64": 98}[platform.machine()]
tid = threading.get_native_id()
in_call = threading.Event()
seen = []
def watch():
    in_call.wait()
    while in_call.is_set() and not seen:
        try:
            with open(f"/proc/self/task/{tid}/syscall") as f:
                first = f.read().split()[0]
        except OSError:
            continue
        if first.isdigit() and int(first) != FUTEX:
            seen.append(int(first))
t = threading.Thread(target=watch)
t.start()
in_call.set()
res = C.poll_dyno()
in_call.clear()
t.join()
print(json.dumps({"res": res, "seen": bool(seen)}))""", env=py_env(MSMONITOR_SOCKET_DIR=str(home)),
               cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == {"res": "", "seen": True}
