"""Kernel monitor end to end: a real dynolog with --use_JSON reads host metrics every
--kernel_monitor_reporting_interval_s, from the fixture trees of tests/unit/daemon/fixtures/kmon
through --procfs_root (exact values) and from the real /proc; `dyno status` shows the
daemon-level keys (uptime, registered processes, loggers) next to the upstream ones."""
import json
import os
import re
import tempfile

from conftest import SOURCE, run_dyno
from daemon_util import rpc, rpc_json
from ipcclient import IpcClient
from waits import wait_until

FIXTURES = os.path.join(SOURCE, "tests", "unit", "daemon", "fixtures", "kmon")


def json_lines(daemon):
    """The JSON logger's records: [dict] in order."""
    out = []
    for line in daemon.log().splitlines():
        m = re.search(r"\] time = \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z data = (\{.*\})$", line)
        if m:
            out.append(json.loads(m.group(1)))
    return out


def wait_record(daemon, pred, timeout=20.0):
    return wait_until(lambda: next((rec for rec in json_lines(daemon) if pred(rec)), None), timeout,
                      "a matching host-metrics record", diag=lambda: daemon.log()[-4000:])


def point(link, snap):
    """Re-point the fixture root atomically (rename over the old symlink): each /proc file of
    a cycle is read from one tree or the other, never half of each."""
    tmp = link + ".new"
    os.symlink(os.path.join(FIXTURES, snap), tmp)
    os.replace(tmp, link)


def test_fixture_tree_exact_values(make_daemon):
    root = tempfile.mkdtemp(prefix="mmroot")
    link = os.path.join(root, "root")
    point(link, "t0")
    d = make_daemon(extra=["--use_JSON", "--procfs_root", link, "--kernel_monitor_reporting_interval_s", "1"])
    first = wait_record(d, lambda r: "uptime" in r)
    # the first cycle: uptime, memory and load only (floats are "%.3f" strings)
    assert first == {"uptime": 12345, "mem_total_kb": 16000000, "mem_free_kb": 4000000,
                     "mem_available_kb": 12000000, "mem_buffers_kb": 100000,
                     "mem_cached_kb": 2000000, "mem_swap_total_kb": 1000000,
                     "mem_swap_free_kb": 900000, "mem_used_pct": "25.000", "load_1m": "0.500",
                     "load_5m": "1.250", "load_15m": "2.000", "procs_running": 3,
                     "procs_total": 456}
    assert "Logging : 14 values" in d.log()
    point(link, "t1")
    # cycles on t0 -> t0 have Δtotal = 0 (no CPU keys): the first with cpu_util is t0 -> t1
    rec = wait_record(d, lambda r: "cpu_util" in r)
    assert {k: rec[k] for k in rec if k.startswith("cpu")} == {
        "cpu_util": "50.000", "cpu_u": "30.000", "cpu_s": "10.000", "cpu_i": "50.000",
        "cpu_guest": "3.000", "cpu_guest_nice": "0.200", "cpu_u_ms": 3000, "cpu_n_ms": 100,
        "cpu_s_ms": 1000, "cpu_w_ms": 500, "cpu_x_ms": 100, "cpu_y_ms": 100, "cpu_z_ms": 200,
        "cpu_guest_ms": 300, "cpu_guest_nice_ms": 20,
        # per core (ours); cpu2 appears only in t1 (hotplug) and waits for a second sample
        "cpu_core_util.cpu0": "50.000", "cpu_core_util.cpu1": "80.000"}
    assert rec["uptime"] == 12347
    net = {k: v for k, v in rec.items() if k.startswith(("rx_", "tx_"))}
    assert sorted({k.split(".", 1)[1] for k in net}) == ["enp3s0", "ens5", "eth0", "eth1", "lo"]
    assert [net[f"{m}.eth0"] for m in ("rx_bytes", "rx_packets", "rx_errors", "rx_drops", "tx_bytes",
                                      "tx_packets", "tx_errors", "tx_drops")] == [1500, 15, 1, 2, 2000, 20, 0, 1]
    assert net["rx_bytes.eth1"] == 0 and net["rx_packets.eth1"] == 10      # wrapped counter
    assert all(net[k] == 0 for k in net if k.endswith(".ens5"))            # new interface
    disks = sorted({k.split(".", 1)[1] for k in rec if k.startswith("disk_")})
    assert disks == ["nvme0n1", "sda", "sdb"]
    assert rec["disk_io_ms.sda"] == 500 and rec["disk_read_bytes.sda"] == 512000
    assert rec["disk_util.nvme0n1"] == "100.000" and rec["disk_reads.nvme0n1"] == 0
    assert 0.0 < float(rec["disk_util.sda"]) <= 100.0
    assert rec["mem_used_pct"] == "50.000"


def test_nic_filter_and_no_extended(make_daemon):
    root = tempfile.mkdtemp(prefix="mmroot")
    link = os.path.join(root, "root")
    point(link, "t0")
    d = make_daemon(extra=["--use_JSON", "--procfs_root", link, "--kernel_monitor_reporting_interval_s", "1",
                           "--filter_nic_interfaces", "--allow_interface_prefixes", "eth",
                           "--noextended_host_metrics"])
    first = wait_record(d, lambda r: "uptime" in r)
    assert first == {"uptime": 12345}
    point(link, "t1")
    rec = wait_record(d, lambda r: "cpu_util" in r)
    assert sorted({k.split(".", 1)[1] for k in rec if "." in k}) == ["eth0", "eth1"]
    assert not any(k.startswith(("mem_", "load_", "disk_")) for k in rec)


def test_unreadable_proc_warns_once_and_serves(make_daemon):
    root = tempfile.mkdtemp(prefix="mmroot")
    d = make_daemon(extra=["--use_JSON", "--procfs_root", os.path.join(root, "missing"),
                           "--kernel_monitor_reporting_interval_s", "1"])
    d.wait_log("kmon: cannot read " + os.path.join(root, "missing") + "/proc/stat")
    # the next cycles are quiet (rate-limited) and RPC keeps answering
    with IpcClient(d.sockdir) as c:
        assert c.poll() == ""
    assert rpc(d.port, '{"fn":"getVersion"}').startswith(b'{"version":')
    assert d.log().count("cannot read " + os.path.join(root, "missing") + "/proc/stat") == 1
    assert json_lines(d) == []


def test_real_proc(make_daemon):
    d = make_daemon(extra=["--use_JSON", "--kernel_monitor_reporting_interval_s", "1"])
    rec = wait_record(d, lambda r: "cpu_util" in r)
    assert 0.0 <= float(rec["cpu_util"]) <= 100.0
    assert "rx_bytes.lo" in rec and isinstance(rec["rx_bytes.lo"], int)
    assert rec["uptime"] > 0 and rec["mem_total_kb"] > 0 and rec["procs_total"] > 0


def test_status_daemon_keys(make_daemon):
    tb = tempfile.mkdtemp(prefix="mmtb")
    d = make_daemon(extra=["--use_JSON", "--metric_log_dir", tb])
    with IpcClient(d.sockdir) as c:
        c.poll(pids=[c.pid, 1])
        r = run_dyno(d, "status")
        assert r.returncode == 0, r.stderr
        st = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][0])
    # upstream keys unchanged, ours added
    assert st["current_step"] == -1 and st["npumonitor"] == "Uninitialized"
    assert [p["pid"] for p in st["processes"]] == [c.pid]
    assert st["loggers"] == ["json", "tensorboard"]
    assert st["registered_processes"] == 1
    assert isinstance(st["daemon_uptime_s"], int) and st["daemon_uptime_s"] >= 0
    assert list(st) == sorted(st)
    plain = make_daemon()
    st = rpc_json(plain.port, {"fn": "getStatus"})
    assert st["loggers"] == [] and st["registered_processes"] == 0


def test_oversized_and_malformed_files(make_daemon, tmp_path):
    """A /proc file over the 256 KiB cap and a malformed one skip only their own metrics, with
    one WARNING each; the rest of the cycle is reported."""
    import shutil
    root = tmp_path / "root"
    shutil.copytree(os.path.join(FIXTURES, "t0"), root)
    (root / "proc" / "net" / "dev").write_text("x" * (300 * 1024))
    (root / "proc" / "loadavg").write_text("0.5 oops 2.0 3/4 5\n")
    d = make_daemon(extra=["--use_JSON", "--procfs_root", str(root), "--kernel_monitor_reporting_interval_s", "1"])
    first = wait_record(d, lambda r: "uptime" in r)
    assert first["uptime"] == 12345 and first["mem_total_kb"] == 16000000
    assert not any(k.startswith(("load_", "procs_")) for k in first)
    d.wait_log(f"kmon: cannot read {root}/proc/net/dev: File too large; its metrics are skipped")
    d.wait_log(f"kmon: cannot parse {root}/proc/loadavg: Invalid argument; its metrics are skipped")
    # the next cycle (disk deltas appear) still has no network keys and repeats no warning
    wait_record(d, lambda r: r.get("uptime") == 12345 and "disk_reads.sda" in r)
    assert d.log().count(f"cannot read {root}/proc/net/dev") == 1
    assert not any(k.startswith("rx_") for r in json_lines(d) for k in r)
