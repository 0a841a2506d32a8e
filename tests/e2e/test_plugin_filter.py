"""libmsmonitor.so record filter end to end (docs/design/session.md#filter, FAQ R19–R22): real dynolog
(--use_JSON), real dyno, the simulator workload with the plugin's native poller. The OpStats
names the daemon receives must be exactly the workload's names that contain a configured
substring, with the simulator's ground-truth counts."""
import collections
import tempfile
import time

from conftest import run_dyno
from plugin_util import Workload, data_lines, op_ticks, wait_registered
from waits import wait_equal, wait_until

KERNEL = 2
PRELOAD_OFF = {"MSSIM_CHECK_PRELOAD": "0"}


def _start(daemon, kinds, filt=None, interval="1"):
    args = ["npu-monitor", "--npu-monitor-start", "--report-interval-s", interval,
            "--mspti-activity-kind", kinds]
    if filt is not None:
        args += ["--filter", filt]
    r = run_dyno(daemon, *args)
    assert r.returncode == 0, r.stderr + r.stdout


def _truth_counts(recs, kinds):
    out = {k: collections.Counter() for k in kinds}
    for r in recs:
        if r["kind"] in out:
            out[r["kind"]][r.get("name", "")] += 1
    return out


def _reported_counts(daemon, kinds):
    out = {k: collections.Counter() for k in kinds}
    for d in data_lines(daemon):
        if d.get("kind") == "OpStats" and d.get("activity") in out:
            for op in d["ops"]:
                out[d["activity"]][op["name"]] += int(op["count"])
    return out


def _settled(daemon, kinds, want):
    """The daemon's OpStats totals per kind once they reach `want` ({kind: {name: count}}):
    the final report of the exited workload may still be on its way (waits.wait_equal)."""
    def get():
        got = _reported_counts(daemon, kinds)
        return {k: dict(got[k]) for k in kinds}
    return wait_equal(get, want, 30, f"the daemon's {'/'.join(kinds)} totals to match the ground truth")


def _monitor_until_data(daemon, kinds, filt, env=None, ticks=2):
    """Workload until SIGTERM; monitoring started with `filt`; stopped (exit path: final
    report, every device record drained) after `ticks` OpStats datagrams arrived."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp, extra_env=env)
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, kinds, filt)
        w.wait_plugin_log("MsptiMonitor start successfully")
        daemon.wait_log('"kind":"OpStats"', timeout=20, count=ticks)
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()
    return w


def _names_containing(counter, subs):
    return {n: c for n, c in counter.items() if any(s in n for s in subs)}


def test_filter_kernel_matmul(daemon):
    w = _monitor_until_data(daemon, "Kernel", "Kernel:MatMul")
    truth = _truth_counts(w.ground_truth(), ["Kernel"])["Kernel"]
    want = _names_containing(truth, ["MatMul"])
    assert set(want) == {"MatMul", "BatchMatMul", "MatMulBackward", "BatchMatMulBackward"}
    got = _settled(daemon, ["Kernel"], {"Kernel": want})["Kernel"]
    assert "Softmax" in truth and "Softmax" not in got


def test_filter_tab_is_trimmed_like_the_cli(daemon):
    """Issue 10: `--filter $'Kernel:\tMatMul'` is accepted by dyno, so the plugin must read
    it the same way (one grammar, spaces and tabs trimmed): it stores `MatMul` and matches,
    instead of storing `\tMatMul` and matching nothing."""
    w = _monitor_until_data(daemon, "Kernel", "Kernel:\tMatMul")
    truth = _truth_counts(w.ground_truth(), ["Kernel"])["Kernel"]
    want = _names_containing(truth, ["MatMul"])
    assert set(want) == {"MatMul", "BatchMatMul", "MatMulBackward", "BatchMatMulBackward"}
    got = _settled(daemon, ["Kernel"], {"Kernel": want})["Kernel"]
    assert "skipped" not in w.plugin_log()


def test_filter_two_kinds_faq_example(daemon):
    w = _monitor_until_data(daemon, "Kernel,Communication", "Kernel:MatMul,Conv2D;Communication:AllReduce")
    truth = _truth_counts(w.ground_truth(), ["Kernel", "Communication"])
    want_k = _names_containing(truth["Kernel"], ["MatMul", "Conv2D"])
    assert {"Conv2D", "Conv2DBackpropFilter", "MatMul"} <= set(want_k)
    got = _settled(daemon, ["Kernel", "Communication"],
                   {"Kernel": want_k, "Communication": dict(truth["Communication"])})
    assert set(got["Communication"]) == {"HcclAllReduce"}


def test_filter_prefix_substring(daemon):
    """`Kernel:Mat` keeps every name containing "Mat" (MatMul, BatchMatMul, MatMulBackward...)."""
    w = _monitor_until_data(daemon, "Kernel", "Kernel:Mat")
    truth = _truth_counts(w.ground_truth(), ["Kernel"])["Kernel"]
    got = _settled(daemon, ["Kernel"], {"Kernel": _names_containing(truth, ["Mat"])})["Kernel"]
    assert "BatchMatMulBackward" in got


def test_filter_names_unlisted_kind_drops_it(daemon):
    """A non-empty filter keeps only the kinds it names: API records are all dropped."""
    w = _monitor_until_data(daemon, "Kernel,AclAPI", "Kernel:Gelu")
    truth = _truth_counts(w.ground_truth(), ["Kernel", "AclAPI"])
    assert sum(truth["AclAPI"].values()) > 0
    got = _settled(daemon, ["Kernel", "AclAPI"],
                   {"Kernel": _names_containing(truth["Kernel"], ["Gelu"]), "AclAPI": {}})
    assert not got["AclAPI"]
    assert not [d for d in data_lines(daemon) if d.get("kind") == "AclAPI"]
    assert dict(got["Kernel"]) == _names_containing(truth["Kernel"], ["Gelu"])
    assert set(got["Kernel"]) == {"Gelu", "GeluGrad"}


def test_empty_filter_keeps_everything(daemon):
    w = _monitor_until_data(daemon, "Kernel", "")
    truth = _truth_counts(w.ground_truth(), ["Kernel"])["Kernel"]
    assert len(truth) > 10
    _settled(daemon, ["Kernel"], {"Kernel": dict(truth)})


def test_memory_kinds_whitelisted(daemon):
    """Memory, MemSet and MemCpy are never filtered, whatever the filter says."""
    kinds = ["Kernel", "Memory", "MemSet", "MemCpy"]
    w = _monitor_until_data(daemon, ",".join(kinds), "Kernel:Softmax", env=PRELOAD_OFF)
    truth = _truth_counts(w.ground_truth(), kinds)
    mem = ("Memory", "MemSet", "MemCpy")
    for k in mem:
        assert sum(truth[k].values()) > 0, k
    # the memory kinds' names are the daemon-side operation names: compared by total
    want = {k: sum(truth[k].values()) for k in mem}
    want["Kernel"] = _names_containing(truth["Kernel"], ["Softmax"])

    def get():
        g = _reported_counts(daemon, kinds)
        out = {k: sum(g[k].values()) for k in mem}
        out["Kernel"] = dict(g["Kernel"])
        return out
    wait_equal(get, want, 30, "the daemon's totals to match the ground truth")
    got = _reported_counts(daemon, kinds)
    assert set(got["Memory"]) == {"ALLOCATION", "RELEASE"}
    assert set(got["MemSet"]) == {"MemSet"}
    assert set(got["MemCpy"]) == {"HTOD"}
    assert dict(got["Kernel"]) == _names_containing(truth["Kernel"], ["Softmax"])


def test_filter_replaced_while_running(daemon):
    """A new command replaces the filter: after the change only the new names arrive."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "Kernel", "Kernel:MatMul")
        w.wait_plugin_log("MsptiMonitor start successfully")
        daemon.wait_log('"kind":"OpStats"', timeout=20)
        _start(daemon, "Kernel", "Kernel:Softmax")
        w.wait_plugin_log("Received NPU configuration successfully", count=2)
        t_change = time.time_ns()
        # The tick in flight at the change may mix both filters; two later ones must not.
        wait_until(lambda: len([t for t in op_ticks(daemon, "Kernel") if t[0] > t_change]) >= 3, 60,
                   "three ticks after the change", diag=lambda: daemon.log()[-4000:])
        assert w.p.poll() is None
    finally:
        w.stop()
    ticks = op_ticks(daemon, "Kernel")
    before = [names for ts, _, names in ticks if ts <= t_change]
    after = [names for ts, _, names in ticks if ts > t_change][1:-1]  # not the final (partial) report
    assert before and set(before[0]) == {"MatMul", "BatchMatMul", "MatMulBackward", "BatchMatMulBackward"}
    assert after
    for names in after:
        assert set(names) == {"Softmax", "SoftmaxCrossEntropyWithLogits", "SoftmaxGrad"}, names


def test_filter_cleared_by_command_without_filter(daemon):
    """Every non-stop command replaces the filter; one without --filter means "no filter"."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        _start(daemon, "Kernel", "Kernel:AddN")
        w.wait_plugin_log("MsptiMonitor start successfully")
        daemon.wait_log('"kind":"OpStats"', timeout=20)
        _start(daemon, "Kernel")
        w.wait_plugin_log("Received NPU configuration successfully", count=2)
        t_change = time.time_ns()
        wait_until(lambda: len([t for t in op_ticks(daemon, "Kernel") if t[0] > t_change]) >= 3, 60,
                   "three ticks after the change", diag=lambda: daemon.log()[-4000:])
    finally:
        w.stop()
    ticks = op_ticks(daemon, "Kernel")
    assert set(ticks[0][2]) == {"AddN"}
    after = [n for ts, _, n in ticks if ts > t_change][1:-1]  # not the final (partial) report
    assert after
    for names in after:
        assert {"AddN", "MatMul", "Softmax", "Conv2D", "ApplyAdamW"} <= set(names)


def test_invalid_filter_means_no_filtering(daemon):
    """A filter without any valid item (sent raw, the CLI would refuse it) is logged and
    means no filtering."""
    from daemon_util import set_config
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(daemon, tmp)
    cfg = ("NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=1\nDURATION=0\n"
           "MSPTI_ACTIVITY_KIND=Kernel\nNPU_MONITOR_LOG_FILE=\nNPU_MONITOR_EXPORT_TYPE=DB\n"
           "NPU_MONITOR_FILTER=kernel:MatMul\n")
    try:
        wait_registered(daemon, w.p.pid)
        rep = set_config(daemon.port, cfg, pids=[0])
        assert rep is not None
        w.wait_plugin_log("filter 'kernel:MatMul' has no valid item; no filtering applied")
        w.wait_plugin_log("MsptiMonitor start successfully")
        daemon.wait_log('"kind":"OpStats"', timeout=20, count=2)
    finally:
        w.stop()
    truth = _truth_counts(w.ground_truth(), ["Kernel"])["Kernel"]
    got = _settled(daemon, ["Kernel"], {"Kernel": dict(truth)})["Kernel"]
    assert "Softmax" in got
