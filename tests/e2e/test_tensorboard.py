"""TensorBoard logger end to end: a real dynolog with --metric_log_dir receives `data`
datagrams (all 11 kinds, markers, OpStats, PluginStats) on its data socket and from a real
simulator workload with the plugin; the event files are read back by tfrecord_reader.py (an
independent reader of the record format) for tags, steps and values."""
import collections
import os
import struct
import subprocess
import tempfile
import time

import pytest

from conftest import Daemon, binpath, run_dyno
from ipcclient import IpcClient
from plugin_util import Workload, data_lines, wait_registered
from waits import wait_until
import tfrecord_reader as tfr

KINDS = ["Marker", "Kernel", "API", "Hccl", "Memory", "MemSet", "MemCpy", "Communication",
         "AclAPI", "NodeAPI", "RuntimeAPI"]


def f32(x):
    """x as the float32 a scalar summary holds."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _wait_events(path, count, timeout=30.0):
    def events():
        ev = tfr.events(path) if os.path.exists(path) else []
        return ev if len(ev) >= count else None
    return wait_until(events, timeout, f"{count} events in {path}",
                      diag=lambda: f"{len(tfr.events(path)) if os.path.exists(path) else 0} events")


def test_all_kinds_markers_and_op_stats(make_daemon):
    tb = tempfile.mkdtemp(prefix="mmtb")
    d = make_daemon(extra=["--metric_log_dir", os.path.join(tb, "logs"), "--tensorboard_op_stats"])
    d.wait_log("Initialized tensorboard logger on = " + os.path.join(tb, "logs"))
    with IpcClient(d.sockdir) as c:
        for i, kind in enumerate(KINDS):
            for rep in range(2):
                c.data({"kind": kind, "duration": 1000 * (i + 1) + rep, "timestamp": 5 + rep,
                        "deviceId": 3})
        c.data({"kind": "Marker", "domain": "fwd", "duration": 77, "timestamp": 9, "deviceId": 3})
        c.data({"kind": "Kernel", "duration": 5, "timestamp": 9, "deviceId": "host"})
        c.data({"kind": "OpStats", "activity": "Kernel", "duration": 0, "timestamp": 10,
                "deviceId": 3, "ops": [{"name": "matmul", "count": 4, "total": 400, "avg": 100,
                                        "min": 90, "max": 110}]})
        c.data({"kind": "Kernel", "duration": 1, "timestamp": 1, "deviceId": "../../etc"})
    dev3 = os.path.join(tb, "logs", "device_3", "tfevents.pb")
    evs = _wait_events(dev3, 1 + 22 + 1 + 3)
    assert evs[0]["file_version"] == "brain.Event:2" and evs[0]["values"] == []
    got = tfr.scalars(dev3)
    for i, kind in enumerate(KINDS):
        want = [(0, 1000.0 * (i + 1)), (1, 1000.0 * (i + 1) + 1)]
        assert got[kind] == want, kind
    # the Marker/<domain> tag continues the Marker counter
    assert got["Marker/fwd"] == [(2, 77.0)]
    assert got["ops/Kernel/matmul/total_ns"] == [(0, 400.0)]
    assert got["ops/Kernel/matmul/count"] == [(0, 4.0)]
    assert got["ops/Kernel/matmul/avg_ns"] == [(0, 100.0)]
    host = tfr.scalars(os.path.join(tb, "logs", "device_host", "tfevents.pb"))
    assert host == {"Kernel": [(0, 5.0)]}
    d.wait_log("is not usable as a directory name")
    assert not os.path.exists(os.path.join(tb, "etc"))
    # wall_time is the receipt time, in seconds
    assert abs(evs[1]["wall_time"] - time.time()) < 3600


def test_host_metrics_file_and_restart_appends(make_daemon):
    tb = tempfile.mkdtemp(prefix="mmtb")
    d = make_daemon(extra=["--metric_log_dir", tb, "--kernel_monitor_reporting_interval_s", "1"])
    hm = os.path.join(tb, "host_metrics", "tfevents.pb")
    # the first cycle runs at start-up: uptime (and memory) at step 0
    wait_until(lambda: "cpu_util" in (tfr.scalars(hm) if os.path.exists(hm) else {}), 30,
               "a second kernel-monitor cycle")
    s = tfr.scalars(hm)
    assert s["uptime"][0][0] == 0 and s["uptime"][0][1] > 0
    assert s["cpu_util"][0][0] == 0 and 0.0 <= s["cpu_util"][0][1] <= 100.0
    assert s["mem_total_kb"][0][1] > 0
    with IpcClient(d.sockdir) as c:
        c.data({"kind": "Kernel", "duration": 10, "timestamp": 1, "deviceId": 0})
    dev0 = os.path.join(tb, "device_0", "tfevents.pb")
    _wait_events(dev0, 2)
    assert d.stop() == 0
    d2 = make_daemon(extra=["--metric_log_dir", tb])
    with IpcClient(d2.sockdir) as c:
        c.data({"kind": "Kernel", "duration": 20, "timestamp": 2, "deviceId": 0})
    evs = _wait_events(dev0, 3)
    # appended: one version record only, steps restart with the daemon run
    assert [e.get("file_version") for e in evs] == ["brain.Event:2", None, None]
    assert tfr.scalars(dev0)["Kernel"] == [(0, 10.0), (0, 20.0)]


def test_unusable_log_dir_is_fatal(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("x")
    for bad in (str(plain), str(plain / "sub")):
        sock = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
        env = dict(os.environ, MSMONITOR_SOCKET_DIR=sock, HOME=sock)
        from conftest import free_port
        r = subprocess.run([binpath("dynolog"), "--port", str(free_port()), "--metric_log_dir", bad],
                           env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 1
        assert f"Unable to record logs in the target folder: {bad}: Not a directory" in r.stderr


def test_simulator_workload_kernels_match(make_daemon):
    """A real monitored job: every Kernel sum line the daemon received is one TensorBoard
    scalar of its device file, in order, with the same duration."""
    tb = tempfile.mkdtemp(prefix="mmtb")
    d = make_daemon(extra=["--metric_log_dir", tb, "--tensorboard_op_stats"])
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(d, tmp, args=("--steps", "30"))
    try:
        wait_registered(d, w.p.pid)
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", "Kernel,Marker")
        assert r.returncode == 0, r.stderr + r.stdout
        w.wait_plugin_log("MsptiMonitor start successfully")
        w.p.wait(120)
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()
    want = collections.defaultdict(list)
    ops = collections.Counter()
    stats = 0
    for m in data_lines(d):
        dev = "host" if str(m["deviceId"]) in ("-1", "host") else str(m["deviceId"])
        if m["kind"] == "Kernel":
            want[dev].append(f32(m["duration"]))
        elif m["kind"] == "OpStats" and m["activity"] == "Kernel":
            for op in m["ops"]:
                ops[(dev, op["name"])] += op["count"]
        elif m["kind"] == "PluginStats" and m.get("pid") == w.p.pid:
            stats += 1
    assert want, "no Kernel data arrived"
    for dev, durs in want.items():
        got = tfr.scalars(os.path.join(tb, f"device_{dev}", "tfevents.pb"))
        assert [v for _, v in got["Kernel"]] == durs
        assert [s for s, _ in got["Kernel"]] == list(range(len(durs)))
        for (odev, name), count in ops.items():
            if odev == dev:
                assert sum(v for _, v in got[f"ops/Kernel/{name}/count"]) == count
    # the plugin's per-session counters reach the loggers as PluginStats/<pid>/<counter>
    assert stats > 0
    host = tfr.scalars(os.path.join(tb, "device_host", "tfevents.pb"))
    kept = host[f"PluginStats/{w.p.pid}/kept"]
    assert len(kept) == stats and [s for s, _ in kept] == list(range(stats))


def test_unopenable_device_file_drops_only_that_device(make_daemon):
    """A device file that cannot be opened (a symlink, refused with O_NOFOLLOW; a FIFO with no
    reader, which must not block the loop) loses that device's records with one ERROR line;
    other devices and IPC keep working."""
    tb = tempfile.mkdtemp(prefix="mmtb")
    os.makedirs(os.path.join(tb, "device_1"))
    os.symlink("/dev/full", os.path.join(tb, "device_1", "tfevents.pb"))
    os.makedirs(os.path.join(tb, "device_4"))
    os.mkfifo(os.path.join(tb, "device_4", "tfevents.pb"))
    d = make_daemon(extra=["--metric_log_dir", tb])
    with IpcClient(d.sockdir) as c:
        for i in range(5):
            c.data({"kind": "Kernel", "duration": i, "timestamp": i, "deviceId": 1})
            c.data({"kind": "Kernel", "duration": i, "timestamp": i, "deviceId": 4})
        c.data({"kind": "Kernel", "duration": 9, "timestamp": 9, "deviceId": 2})
        _wait_events(os.path.join(tb, "device_2", "tfevents.pb"), 2)
        assert c.poll() == ""
    log = d.log()
    assert log.count("tensorboard: cannot open " + os.path.join(tb, "device_1", "tfevents.pb")) == 1
    assert log.count("tensorboard: cannot open " + os.path.join(tb, "device_4", "tfevents.pb") +
                     ": No such device or address") == 1
    assert tfr.scalars(os.path.join(tb, "device_2", "tfevents.pb")) == {"Kernel": [(0, 9.0)]}


def test_json_and_tensorboard_loggers_together(make_daemon):
    """Several loggers at once: the same host-metric and data records reach both."""
    from test_hostmetrics import json_lines, wait_record
    tb = tempfile.mkdtemp(prefix="mmtb")
    d = make_daemon(extra=["--use_JSON", "--metric_log_dir", tb])
    first = wait_record(d, lambda r: "uptime" in r)
    # the JSON logger runs before the TensorBoard one on the same record: the JSON line can be
    # seen before the event is appended, so wait for the file to hold the whole cycle
    hm_path = os.path.join(tb, "host_metrics", "tfevents.pb")
    hm = wait_until(lambda: (lambda hm: hm if set(first) <= set(hm) else None)(
        tfr.scalars(hm_path) if os.path.exists(hm_path) else {}), 30, "the whole first cycle in the file")
    # every key of the first cycle, at step 0, with the JSON logger's value (integers exact as
    # float32; floats are "%.3f" strings there)
    assert sorted(hm) == sorted(first)
    for key, val in first.items():
        (step, got), = hm[key]
        assert step == 0
        if isinstance(val, int):
            assert got == f32(val), key
        else:
            assert f"{got:.3f}" == val or abs(got - float(val)) <= 0.0005, key
    with IpcClient(d.sockdir) as c:
        c.data({"kind": "Hccl", "duration": 4242, "timestamp": 7, "deviceId": 5})
    rec = wait_record(d, lambda r: r.get("kind") == "Hccl")
    assert rec == {"deviceId": "5", "duration": 4242, "kind": "Hccl", "timestamp": 7}
    evs = _wait_events(os.path.join(tb, "device_5", "tfevents.pb"), 2)
    assert evs[1]["values"] == [("Hccl", 4242.0)] and evs[1]["step"] == 0
    assert len([r for r in json_lines(d) if "uptime" in r]) == 1
