"""Helpers for the plugin end-to-end tests: a simulator workload with libmsmonitor.so loaded
and the native poller on, the plugin's own log file, the simulator's ground-truth dump and the
daemon's JSON-logger data lines."""
import glob
import json
import os
import time

from conftest import Proc, binpath


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
        deadline = time.monotonic() + 20
        while not os.path.exists(self.ready):
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("workload not ready:\n" + self.log())
            time.sleep(0.02)

    def plugin_log(self):
        out = ""
        for f in sorted(glob.glob(os.path.join(self.tmpdir, "msmonitor_log", "*.log"))):
            with open(f, "rb") as fh:
                out += fh.read().decode("utf-8", "replace")
        return out

    def wait_plugin_log(self, text, timeout=20.0, count=1):
        deadline = time.monotonic() + timeout
        while True:
            out = self.plugin_log()
            if out.count(text) >= count:
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"timeout waiting for {text!r} in plugin log:\n{out[-4000:]}")
            time.sleep(0.05)

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
    for line in daemon.log().splitlines():
        if "Received data message : " in line:
            out.append(json.loads(line.split("Received data message : ", 1)[1]))
    return out


def wait_registered(daemon, pid, timeout=20.0):
    daemon.wait_log(f"Registered process ({pid}", timeout=timeout)


def thread_names(pid):
    names = []
    for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
        try:
            with open(comm) as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names
