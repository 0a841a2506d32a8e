"""The CPython extension IPCMonitor_C and the package surface (docs/design/session.md#python-surface), each
scenario in a fresh interpreter: ActivityKind, record classes, argument checking,
Singleton, identical packages, and a missing daemon."""
import filecmp
import os

import pytest

from python_util import SOURCE, last_json, py_env, require_packages, run_py


@pytest.fixture(autouse=True)
def _built():
    require_packages()


def test_activity_kind_members():
    r = run_py("""
import json
from IPCMonitor import ActivityKind
import IPCMonitor_C
K = ActivityKind
print(json.dumps({
  "members": [[m.name, m.value] for m in K],
  "same": K is IPCMonitor_C.monitor.ActivityKind,
  "eq_int": K.API == 3, "eq_self": K.API == K.API, "eq_other": K.API == K.Kernel,
  "hash": len({K.API: 1, K.Kernel: 2, K.API: 3}),
  "lookup": K(9) is K.Communication,
}))""")
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert out["members"] == [["API", 3], ["Kernel", 2], ["Communication", 9], ["Marker", 1],
                              ["AclAPI", 10], ["NodeAPI", 11], ["RuntimeAPI", 12]]
    assert out["same"] and out["eq_self"] and out["lookup"]
    assert not out["eq_int"] and not out["eq_other"]
    assert out["hash"] == 2


def test_record_classes_read_write_and_to_tuple():
    r = run_py("""
import json
import IPCMonitor  # puts lib64 on sys.path
from IPCMonitor_C import monitor as m
a = m.API(); a.name = "aclnnAdd"; a.startNs = 1500; a.endNs = 4000; a.pid = 7; a.tid = 8; a.correlationId = 9
k = m.Kernel(name="MatMul", startNs=2000, endNs=5000, deviceId=1, streamId=2, correlationId=3, type="KERNEL_AICORE")
c = m.Communication(name="HcclAllReduce", startNs=1000, endNs=3000, deviceId=1, streamId=1, count=16,
                    dataType="FP32", commName="hccl_world_group", algType="RING", correlationId=5)
mk = m.Marker(name="step 1", sourceKind=1, domain="default", id=4, startNs=10, endNs=20, pid=0, tid=0,
              deviceId=3, streamId=0)
errors = []
for obj, attr, val in ((a, "name", 1), (a, "pid", "x"), (k, "type", None), (mk, "sourceKind", 1.5)):
    try:
        setattr(obj, attr, val)
        errors.append("none")
    except TypeError:
        errors.append("TypeError")
try:
    a.pid = 1 << 40
    errors.append("none")
except OverflowError:
    errors.append("OverflowError")
print(json.dumps({"api": a.to_tuple(), "kernel": k.to_tuple(), "comm": c.to_tuple(), "marker": mk.to_tuple(),
                  "read": [a.pid, k.type, c.count, mk.id], "errors": errors}))""")
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert out["api"] == ["aclnnAdd", 1.5, 4.0, 7, 8, 9]
    assert out["kernel"] == ["MatMul", 2.0, 5.0, 1, 2, 3, "KERNEL_AICORE"]
    assert out["comm"] == ["HcclAllReduce", 1.0, 3.0, 1, 1, 16, "FP32", "hccl_world_group", "RING", 5]
    assert out["marker"] == ["step 1", 1, "default", 4, 0.01, 0.02, 0, 0, 3, 0]
    assert out["read"] == [7, "KERNEL_AICORE", 16, 4]
    assert out["errors"] == ["TypeError"] * 4 + ["OverflowError"]


def test_wrong_argument_types_raise_type_error_only():
    r = run_py("""
import json
from IPCMonitor._ipcmonitor_C import IPCMonitor_C as C
calls = [
  lambda: C.init_dyno("0"), lambda: C.init_dyno(npu_id=None),
  lambda: C.enable_dyno_npu_monitor(["NPU_MONITOR_START"]), lambda: C.enable_dyno_npu_monitor({1: "x"}),
  lambda: C.set_cluster_config_data({"k": 1}), lambda: C.update_profiler_status("x"),
  lambda: C.update_profiler_status({"profiler_status": 0}),
  lambda: C.monitor.start_monitor("Kernel"), lambda: C.monitor.start_monitor([2]),
  lambda: C.monitor.save_xlsx(3),
]
res = []
for f in calls:
    try:
        f(); res.append("ok")
    except TypeError:
        res.append("TypeError")
    except Exception as e:
        res.append(type(e).__name__)
# Non-str values are converted with str(); an invalid config is ignored, not raised.
C.enable_dyno_npu_monitor({"NPU_MONITOR_START": True, "REPORT_INTERVAL_S": 2})
C.update_profiler_status({"profiler_status": "x"})
print(json.dumps({"res": res, "big": C.init_dyno(1 << 40)}))""",
               env=py_env(MSMONITOR_SOCKET_DIR="/nonexistent-msmon-dir"))
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert out["res"] == ["TypeError"] * 10
    assert out["big"] is False


def test_singleton_and_classmethods():
    r = run_py("""
import json
from IPCMonitor import PyDynamicMonitorProxy as P
from IPCMonitor.singleton import Singleton
@Singleton
class X:
    @classmethod
    def m(cls): return cls.__name__
print(json.dumps({"same": P() is P(), "x": X() is X(), "m": [X().m(), X.m()], "poll": P.poll_dyno(),
                  "isinst": isinstance(P(), P)}))""", env=py_env(MSMONITOR_SOCKET_DIR="/nonexistent-msmon-dir"))
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert out == {"same": True, "x": True, "m": ["X", "X"], "poll": "", "isinst": True}


def test_daemon_absent_init_fails_fast_and_app_continues(tmp_path):
    empty = tmp_path / "nosock"
    empty.mkdir()
    r = run_py("""
import json
from msmonitor import PyDynamicMonitorProxy as P
ok = P.init_dyno(0)
print(json.dumps({"init": ok, "poll": P.poll_dyno()}))""", env=py_env(MSMONITOR_SOCKET_DIR=str(empty)),
               cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == {"init": False, "poll": ""}
    logs = list((tmp_path / "msmonitor_log").glob("msmonitor_*.log"))
    assert logs and "Failed to send register ctxt" in logs[0].read_text()


def test_both_packages_share_one_core():
    r = run_py("""
import json, sys
import IPCMonitor, msmonitor
maps = [l for l in open("/proc/self/maps") if "libmsmonitor.so" in l]
print(json.dumps({"paths": sorted({l.split()[-1] for l in maps}),
                  "mods": [m for m in sys.modules if m.startswith("IPCMonitor_C")]}))""")
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert len(out["paths"]) == 1
    assert sorted(out["mods"]) == ["IPCMonitor_C", "IPCMonitor_C.dynamic", "IPCMonitor_C.fwdhook", "IPCMonitor_C.monitor",
                                 "IPCMonitor_C.optstep"]


def test_ipcmonitor_and_msmonitor_packages_identical():
    """Both packages are laid out from one source directory: same modules, same bytes."""
    from python_util import BUILD
    a = os.path.join(BUILD, "python", "pkg", "IPCMonitor")
    b = os.path.join(BUILD, "python", "pkg", "msmonitor")
    names = sorted(f for f in os.listdir(b) if f.endswith(".py"))
    for must in ["__init__.py", "_ipcmonitor_C.py", "dynamic_monitor_proxy.py", "monitor.py", "utils.py",
                 "singleton.py", "file_manager.py"]:
        assert must in names
    assert sorted(f for f in os.listdir(a) if f.endswith(".py")) == names
    match, mismatch, errors = filecmp.cmpfiles(a, b, names + ["lib64/IPCMonitor_C.so"], shallow=False)
    assert (mismatch, errors) == ([], [])