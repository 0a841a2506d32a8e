"""Helpers for the plugin end-to-end tests: a simulator workload with libmsmonitor.so loaded
and the native poller on, the plugin's own log file, the simulator's ground-truth dump and the
daemon's JSON-logger data lines."""
import glob
import json
import os

from conftest import Proc, binpath
from waits import wait_log, wait_until


class Workload(Proc):
    """mssim-train --with-plugin libmsmonitor.so, talking to `daemon` (may be None)."""

    def __init__(self, daemon, tmpdir, extra_env=None, args=()):
        self.dump = os.path.join(tmpdir, "dump.jsonl")
        self.ready = os.path.join(tmpdir, "ready")
        env = daemon.client_env() if daemon is not None else dict(os.environ)
        env.update({
            "MSMONITOR_USE_DAEMON": "1",
            "MSMONITOR_NATIVE_POLL": "1",
            "MSMONITOR_MSPTI_LIB": binpath("libmspti.so"),
            "MSMONITOR_LOG_PATH": tmpdir,
            "MSSIM_DUMP": self.dump,
        })
        if extra_env:
            env.update(extra_env)
        argv = [binpath("mssim-train"), "--with-plugin", binpath("libmsmonitor.so"),
                "--steps", "0", "--ready-file", self.ready] + list(args)
        super().__init__(argv, env=env, logname="workload", tmpdir=tmpdir)
        wait_until(lambda: os.path.exists(self.ready), 60, "the workload to be ready", diag=self.log, alive=self)

    def plugin_log(self):
        out = ""
        for f in sorted(glob.glob(os.path.join(self.tmpdir, "msmonitor_log", "*.log"))):
            with open(f, "rb") as fh:
                out += fh.read().decode("utf-8", "replace")
        return out

    def wait_plugin_log(self, text, timeout=20.0, count=1):
        return wait_log(self.plugin_log, text, timeout, what=f"{text!r} in the plugin log", count=count)

    def ground_truth(self):
        """Records the simulator appended to our buffers (complete once the workload exited)."""
        recs = []
        with open(self.dump) as f:
            for line in f:
                line = line.strip()
                if line:
                    recs.append(json.loads(line))
        return recs


def data_lines(daemon):
    """`data` datagrams as the daemon received them (`Received data message : {...}`); the
    JSON logger's own lines flatten values to strings and drop arrays, so counts come from
    the raw messages."""
    out = []
    text = daemon.log()
    # the daemon may be in the middle of writing the last line: only whole lines count
    lines = text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]
    for line in lines:
        if "Received data message : " in line:
            out.append(json.loads(line.split("Received data message : ", 1)[1]))
    return out


def wait_registered(daemon, pid, timeout=20.0):
    """The daemon logged the registration and the process has polled once (getStatus shows
    it `polling`): only then does a config sent with `dyno` reach it (the daemon targets the
    processes that polled, and registration is logged before the first poll arrives)."""
    from daemon_util import rpc_json
    daemon.wait_log(f"Registered process ({pid}", timeout=timeout)
    last = {}

    def polled():
        last["st"] = st = rpc_json(daemon.port, {"fn": "getStatus"}) or {}
        return any(p["pid"] == pid and p["polling"] for p in st.get("processes", []))
    wait_until(polled, timeout, f"pid {pid} (registered) to poll", diag=lambda: repr(last.get("st")),
               interval=0.02)


def thread_names(pid):
    names = []
    for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
        try:
            with open(comm) as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


# A Python workload driving the simulator's bulk producer (`mssim_bench_fill`): bursts of
# records of the kinds in `mask` (only those currently enabled are produced), so tests can
# flood the plugin's buffers or pair the plugin with another simulator library. On SIGTERM it
# stops the poller, finalizes the plugin and prints the simulator's statistics as one line
# `STATS {...}`.
_FILL_SCRIPT = r"""
import ctypes, json, os, signal, sys, time
sys.path.insert(0, os.environ["MSMON_E2E_PYPATH"])
import mssim
sim = mssim.load(os.environ["MSMON_E2E_SIM"])
plugin = ctypes.CDLL(os.environ["MSMON_E2E_PLUGIN"], mode=ctypes.RTLD_GLOBAL)
plugin.msmon_native_poll_start()  # loading starts nothing (docs/plugin.md)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
mask, burst, pause = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
open(sys.argv[4], "w").close()
while not stop:
    sim.bench_fill(mask, burst)
    time.sleep(pause)
plugin.msmon_native_poll_stop()
plugin.msmon_finalize()
print("STATS " + json.dumps(sim.stats()), flush=True)
"""


class FillWorkload(Proc):
    """/usr/bin/python3 running _FILL_SCRIPT with libmsmonitor.so and the simulator library
    `sim_lib` (default libmspti.so; the plugin is pinned to the same file)."""

    def __init__(self, daemon, tmpdir, mask, burst, pause_s, sim_lib=None, extra_env=None):
        from conftest import SOURCE
        self.ready = os.path.join(tmpdir, "ready")
        sim_lib = sim_lib or binpath("libmspti.so")
        env = daemon.client_env() if daemon is not None else dict(os.environ)
        env.update({
            "MSMONITOR_USE_DAEMON": "1",
            "MSMONITOR_NATIVE_POLL": "1",
            "MSMONITOR_MSPTI_LIB": sim_lib,
            "MSMONITOR_LOG_PATH": tmpdir,
            "MSMON_E2E_PYPATH": os.path.join(SOURCE, "python"),
            "MSMON_E2E_SIM": sim_lib,
            "MSMON_E2E_PLUGIN": binpath("libmsmonitor.so"),
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        if extra_env:
            env.update(extra_env)
        argv = ["/usr/bin/python3", "-c", _FILL_SCRIPT, str(mask), str(burst), str(pause_s), self.ready]
        super().__init__(argv, env=env, logname="fill", tmpdir=tmpdir)
        wait_until(lambda: os.path.exists(self.ready), 60, "the fill workload to be ready", diag=self.log,
                   alive=self)

    plugin_log = Workload.plugin_log
    wait_plugin_log = Workload.wait_plugin_log

    def finish(self):
        """SIGTERM, wait, return the simulator statistics it printed."""
        self.stop()
        for line in self.log().splitlines():
            if line.startswith("STATS "):
                return json.loads(line[6:])
        raise AssertionError("no STATS line:\n" + self.log()[-4000:])


def op_ticks(daemon, activity=None):
    """OpStats per report tick: [(timestamp, activity, {name: count})], merged over devices
    and datagrams of one tick (they share the aggregation timestamp)."""
    ticks = {}
    for d in data_lines(daemon):
        if d.get("kind") != "OpStats" or (activity and d.get("activity") != activity):
            continue
        key = (int(d["timestamp"]), d["activity"])
        names = ticks.setdefault(key, {})
        for op in d["ops"]:
            names[op["name"]] = names.get(op["name"], 0) + int(op["count"])
    return sorted((ts, act, names) for (ts, act), names in ticks.items())


def kinds_after(daemon, t_ns):
    """Report timestamps (sorted) and the kinds reported in each, for ticks after t_ns."""
    out = {}
    for d in data_lines(daemon):
        ts = int(d["timestamp"])
        if d.get("kind") in ("OpStats", "Marker", "PluginStats", "ConfigAck") or ts <= t_ns:
            continue
        out.setdefault(ts, set()).add(d["kind"])
    return sorted(out.items())
