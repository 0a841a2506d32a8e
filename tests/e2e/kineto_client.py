"""A stand-in for a PyTorch process with KINETO_USE_DAEMON: speaks Kineto's dynolog client
protocol byte for byte (ipcclient.KinetoClient) and behaves like libkineto's on-demand loop:
optional ctxt registration, then a req every --interval s (type 2 = ACTIVITIES while the
profiler can take a config, type 0 keep-alives while a trace runs), ~90 ms reply wait,
Kineto's config parser, and the trace file written under Kineto's per-process name.
Prints one JSON object per event on stdout.

    python3 kineto_client.py [--gpu N] [--interval S] [--run-s S]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ipcclient import (KINETO_ACTIVITIES, KINETO_NONE, KinetoClient,  # noqa: E402
                       kineto_log_file, parse_kineto_config)


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", type=int, default=None)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--run-s", type=float, default=60)
    a = ap.parse_args()
    with KinetoClient(kdir=os.environ.get("KINETO_IPC_SOCKET_DIR") or None) as c:
        emit(event="start", pid=c.pid, pids=c.pids, job=c.job, name=c.name)
        if a.gpu is not None:
            emit(event="ctxt", count=c.ctxt(a.gpu))
        trace_until = None
        trace_file = None
        end = time.monotonic() + a.run_s
        while time.monotonic() < end:
            busy = trace_until is not None
            r = c.poll(KINETO_NONE if busy else KINETO_ACTIVITIES)
            emit(event="poll", type=KINETO_NONE if busy else KINETO_ACTIVITIES,
                 reply=None if r is None else r[0],
                 src=None if r is None else r[1].decode("latin-1") if isinstance(r[1], bytes) else r[1])
            if r is not None and r[0]:
                print("Received config from dyno:\n" + r[0], file=sys.stderr, flush=True)
                try:
                    cfg = parse_kineto_config(r[0])
                except ValueError as e:
                    emit(event="rejected", error=str(e))
                    cfg = None
                if cfg is not None:
                    emit(event="config", keys=cfg)
                    trace_file = kineto_log_file(cfg.get("ACTIVITIES_LOG_FILE",
                                                         "/tmp/libkineto_activities.json"), c.pid)
                    trace_until = time.monotonic() + int(cfg.get("ACTIVITIES_DURATION_MSECS", 500)) / 1000
            if trace_until is not None and time.monotonic() >= trace_until:
                with open(trace_file, "w") as f:
                    json.dump({"traceEvents": [], "trace_id": cfg.get("REQUEST_TRACE_ID")}, f)
                emit(event="trace_written", path=trace_file)
                trace_until = None
            time.sleep(a.interval)


if __name__ == "__main__":
    main()
