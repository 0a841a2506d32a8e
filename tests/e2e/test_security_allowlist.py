"""--allowed_log_dirs end to end (issue 13 item 2): the real daemon, the real dyno and a
simulator workload with the plugin. A config whose --log-file resolves outside every allowed
root (absolute, `..`, a symlinked parent, relative) is refused by the daemon with the reason in
dyno's output, and never reaches the registered process; inside, it is delivered as before.
Without the flag nothing changes, and a daemon reachable from the network says so once."""
import json
import os
import subprocess
import tempfile

import pytest

from conftest import Daemon, binpath, free_port, run_dyno
from plugin_util import Workload, wait_registered

KINDS = "Kernel,API"


def reply_of(stdout):
    line = [l for l in stdout.splitlines() if l.startswith("response = ")][-1]
    return json.loads(line[len("response = "):])


@pytest.fixture
def tree():
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="mmal"))
    ok = os.path.join(tmp, "ok")
    out = os.path.join(tmp, "outside")
    os.makedirs(ok)
    os.makedirs(out)
    os.symlink(out, os.path.join(ok, "link"))
    return tmp, ok, out


def npu_monitor(d, log_file, start=True):
    args = ["npu-monitor", "--npu-monitor-start" if start else "--npu-monitor-stop",
            "--report-interval-s", "1", "--mspti-activity-kind", KINDS]
    if log_file is not None:
        args += ["--log-file", log_file]
    return run_dyno(d, *args)


def test_refused_configs_never_reach_the_process(tree):
    tmp, ok, out = tree
    d = Daemon(extra=["--allowed_log_dirs", ok, "--rpc_bind_address", "127.0.0.1"])
    w = None
    try:
        d.wait_log("--log-file of npu-monitor/nputrace configs must resolve below " + ok)
        assert "without --allowed_log_dirs" not in d.log()
        w = Workload(d, tempfile.mkdtemp(prefix="mmalw"))
        wait_registered(d, w.p.pid)
        escapes = {
            "/etc/msmon_probe/sub": "'/etc/msmon_probe/sub' is outside every allowed directory",
            ok + "/../outside/db": "resolves to '%s/db'" % out,
            ok + "/link/db": "resolves to '%s/db'" % out,
            "relative/db": "'relative/db' is not an absolute path",
        }
        for path, why in escapes.items():
            r = npu_monitor(d, path)
            rep = reply_of(r.stdout)
            assert rep["commandStatus"] == "refused", r.stdout
            assert why in rep["reason"] and "--allowed_log_dirs=" + ok in rep["reason"], rep
        d.wait_log("refused config: NPU_MONITOR_LOG_FILE")
        # nputrace (ACTIVITIES_LOG_FILE) is checked the same way
        r = run_dyno(d, "nputrace", "--start-step", "1", "--iterations", "1",
                     "--log-file", ok + "/../outside/trace")
        assert reply_of(r.stdout)["commandStatus"] == "refused", r.stdout
        assert not os.path.exists("/etc/msmon_probe")
        assert os.listdir(out) == []
        # inside: delivered, and the mailbox was empty (busy 0): none of the refused configs
        # was ever queued for the process
        inside = os.path.join(ok, "run", "db")
        r = npu_monitor(d, inside)
        rep = reply_of(r.stdout)
        assert rep["commandStatus"] == "effective", r.stdout
        assert rep["activityProfilersBusy"] == 0 and rep["activityProfilersTriggered"] == [w.p.pid]
        w.wait_plugin_log("MsptiMonitor start successfully")
        r = npu_monitor(d, None, start=False)
        w.wait_plugin_log("MsptiMonitor stop successfully")
        assert w.plugin_log().count("MsptiMonitor start successfully") == 1
        assert os.path.isdir(inside)
        assert os.listdir(out) == []
        # metrics to the daemon (no --log-file) stay allowed
        r = npu_monitor(d, None)
        assert reply_of(r.stdout)["commandStatus"] == "effective", r.stdout
    finally:
        if w:
            w.stop()
        d.stop()


def test_without_the_flag_behaviour_is_unchanged_and_warned(tree):
    tmp, ok, out = tree
    d = Daemon()
    try:
        d.wait_log("RPC is served on a non-loopback address without TLS and without "
                   "--allowed_log_dirs")
        with_ipc = Workload(d, tempfile.mkdtemp(prefix="mmalw"))
        try:
            wait_registered(d, with_ipc.p.pid)
            r = npu_monitor(d, out + "/anywhere")
            assert reply_of(r.stdout)["commandStatus"] == "effective", r.stdout
            with_ipc.wait_plugin_log("MsptiMonitor start successfully")
        finally:
            with_ipc.stop()
    finally:
        d.stop()
    assert d.log().count("without --allowed_log_dirs") == 1


def test_bad_allow_list_fails_start_up(tree):
    tmp, ok, out = tree
    for arg, msg in ((ok + ",relative", "--allowed_log_dirs: 'relative' is not an absolute path"),
                     (tmp + "/missing", "--allowed_log_dirs: '%s/missing' is not an existing directory" % tmp)):
        p = subprocess.run([binpath("dynolog"), "--port", str(free_port()), "--allowed_log_dirs", arg],
                           capture_output=True, text=True, timeout=20,
                           env=dict(os.environ, MSMONITOR_SOCKET_DIR=tmp, HOME=tmp))
        assert p.returncode == 1, p.stderr
        assert msg in p.stderr, p.stderr
