"""One reading of the config text (issue 23 item 3, docs/security.md "Config text: one
reading"): the real daemon with --allowed_log_dirs, configs sent by raw RPC and by the real
dyno, and real consumers — the Kineto-style client (kineto_client.py: '#' comments, Python's
Unicode strip) and a simulator workload with the plugin's native poller. Each attack that used
to be answered "effective" while a consumer read a path outside the allowed directory is now
refused with one line naming the bad bytes; no consumer ever receives it and nothing appears
outside; a plain config is still delivered to both afterwards."""
import json
import os
import sys
import tempfile
import time

import pytest

from conftest import Daemon, Proc, run_dyno
from daemon_util import set_config
from plugin_util import Workload, wait_registered

HERE = os.path.dirname(os.path.abspath(__file__))


def events(proc, kind):
    out = []
    for line in proc.log().splitlines():
        if line.startswith("{"):
            e = json.loads(line)
            if e["event"] == kind:
                out.append(e)
    return out


def wait_event(proc, kind, pred=lambda e: True, count=1, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        hits = [e for e in events(proc, kind) if pred(e)]
        if len(hits) >= count:
            return hits[count - 1]
        assert proc.p.poll() is None, proc.log()[-3000:]
        assert time.monotonic() < deadline, f"no {kind} event:\n" + proc.log()[-3000:]
        time.sleep(0.02)


@pytest.fixture
def tree():
    tmp = os.path.realpath(tempfile.mkdtemp(prefix="mmcf"))
    ok = os.path.join(tmp, "ok")
    out = os.path.join(tmp, "outside")
    os.makedirs(ok)
    os.makedirs(out)
    return ok, out


def attacks(key, ok, out, head=""):
    """(config text, words the refusal must contain): the read-arounds of issue 23 item 3."""
    good = "%s%s=%s/t.json\n" % (head, key, ok)
    return [
        (good + "%s=%s/x.json#=" % (key, out), "config line %d: '#'" % (good.count("\n") + 1)),
        (good + "%s\r=%s/x.json" % (key, out), "control character U+000D"),
        (good + "%s\u3000=%s/x.json" % (key, out), "non-ASCII whitespace U+3000"),
        (good + "%s\u00a0=%s/x.json" % (key, out), "non-ASCII whitespace U+00A0"),
        (good + "%s\u2028=%s/x.json" % (key, out), "non-ASCII whitespace U+2028"),
        (good + "%s\u0085=%s/x.json" % (key, out), "control character U+0085"),
        (good + "%s=%s/x.json" % (key, out), "key repeated"),
        (good + "%s=%s/x.json" % (key.lower(), out), "outside [A-Z0-9_]"),
    ]


def test_kineto_consumer_gets_only_the_checked_text(tree):
    ok, out = tree
    d = Daemon(extra=["--allowed_log_dirs", ok, "--rpc_bind_address", "127.0.0.1"])
    kc = Proc([sys.executable, os.path.join(HERE, "kineto_client.py"), "--interval", "0.1",
               "--run-s", "300"], env=d.client_env(), logname="kineto")
    try:
        pid = wait_event(kc, "start")["pid"]
        wait_event(kc, "poll", lambda e: e["reply"] == "")
        d.wait_log("Registered process (%d" % pid, timeout=60)
        for text, why in attacks("ACTIVITIES_LOG_FILE", ok, out, "ACTIVITIES_DURATION_MSECS=100\n"):
            rep = set_config(d.port, text, pids=[0], timeout=30)
            assert rep["commandStatus"] == "refused", (text, rep)
            assert why in rep["reason"], (why, rep)
            assert "\n" not in rep["reason"] and "\r" not in rep["reason"]
        # the real dyno shows the daemon's one line
        r = run_dyno(d, "gputrace", "--log-file", ok + "/a#b.json", "--duration-ms", "100")
        assert '"commandStatus":"refused","reason":"config line 1: \'#\' (a comment to Kineto)' \
            in r.stdout, r.stdout
        # polls keep coming back empty: no attack ever reached the client
        n = len(events(kc, "poll"))
        wait_event(kc, "poll", count=n + 5)
        assert not events(kc, "config") and not events(kc, "rejected"), kc.log()[-3000:]
        # a plain config is still delivered, read as the daemon checked it, written inside
        rep = set_config(d.port, "ACTIVITIES_LOG_FILE=%s/t.json\nACTIVITIES_DURATION_MSECS=100" % ok,
                         pids=[0], timeout=30)
        assert rep["commandStatus"] == "effective", rep
        keys = wait_event(kc, "config")["keys"]
        assert keys["ACTIVITIES_LOG_FILE"] == ok + "/t.json"
        written = wait_event(kc, "trace_written")["path"]
        assert written.startswith(ok + "/")
        assert os.listdir(out) == []
    finally:
        kc.stop()
        d.stop()


def test_plugin_poller_gets_only_the_checked_text(tree):
    ok, out = tree
    d = Daemon(extra=["--allowed_log_dirs", ok, "--rpc_bind_address", "127.0.0.1"])
    w = None
    try:
        w = Workload(d, tempfile.mkdtemp(prefix="mmcfw"))
        wait_registered(d, w.p.pid, timeout=60)
        head = "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=1\n" \
               "DURATION=0\nMSPTI_ACTIVITY_KIND=Kernel\nNPU_MONITOR_EXPORT_TYPE=DB\n"
        for text, why in attacks("NPU_MONITOR_LOG_FILE", ok, out, head):
            rep = set_config(d.port, text, pids=[0], timeout=30)
            assert rep["commandStatus"] == "refused", (text, rep)
            assert why in rep["reason"], (why, rep)
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel",
                     "--log-file", ok + "/db#1")
        assert "Note: command not applied (refused): config line 6: '#'" in r.stdout, r.stdout
        # the plain config: accepted with busy 0 (nothing refused was ever queued), started once
        rep = set_config(d.port, head + "NPU_MONITOR_LOG_FILE=%s/run" % ok, pids=[0], timeout=30)
        assert rep["commandStatus"] == "effective", rep
        assert rep["activityProfilersBusy"] == 0 and rep["activityProfilersTriggered"] == [w.p.pid]
        w.wait_plugin_log("MsptiMonitor start successfully", timeout=60)
        assert w.plugin_log().count("MsptiMonitor start successfully") == 1
        assert os.listdir(out) == []
    finally:
        if w is not None:
            w.stop()
        d.stop()
