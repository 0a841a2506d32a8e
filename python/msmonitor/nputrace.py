"""msmonitor.nputrace: the Python side of `dyno nputrace` (docs/nputrace.md).

libmsmonitor decides the step window (aligned over the ranks by the shm creator) and writes
its own activity trace; after a `dynamic_profile.step()` at which the window moved this
module reads it (IPCMonitor_C.dynamic.trace_info) and
- with `--activities CPU` and an importable torch, runs `torch.profiler` over the same steps
  and exports its Chrome trace next to ours (`msmonitor_torch_<pid>_rank<r>_step<s>-<e>.json`),
  with `--record-shapes/--profile-memory/--with-stack/--with-flops/--with-modules` mapped to
  its options;
- with `--analyse`, summarises each trace of the window (per-step wall time, top kernels and
  ops by total and self time, communication and memcpy share, idle gaps per device stream)
  as `<trace>_analysis.json` and `<trace>_analysis.txt`; `--async-mode` runs that in a child
  interpreter at idle priority (the same as `python -m msmonitor analyse FILE...`) and exports
  torch.profiler's trace on a thread, so step() waits only for torch.profiler's own stop.

`python -m msmonitor analyse PATH...` (files or directories) is the same analysis
offline, e.g. for traces written by C programs. The step rule, trace categories and file
names are those of msmonitor.facts; traces are read by msmonitor.analysis (docs/design/analysis.md)."""
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

from . import facts as F

TOP_N = 10


def _log(level, msg):
    print(f"[{level}] [msmonitor.nputrace {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def _export_torch(prof, path):
    """torch.profiler's Chrome trace of a stopped profiler, written under .tmp and renamed."""
    try:
        prof.export_chrome_trace(path + ".tmp")
        os.replace(path + ".tmp", path)
        _log("INFO", f"torch.profiler trace written to {path}")
        return path
    except Exception as err:  # noqa: BLE001 - never break the training step
        _log("ERROR", f"torch.profiler trace not written: {err}")
        return None


# The analysis child of --async-mode: at idle priority, so it takes the CPU the training leaves
# (SCHED_IDLE; nice 19 where that is refused), then the offline analysis of the trace files.
_CHILD = ("import os, sys\n"
          "try:\n    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
          "except (AttributeError, OSError):\n    os.nice(19)\n"
          "from msmonitor import nputrace\nsys.exit(nputrace.main())\n")


def torch_trace_name(log_dir, pid, rank, start, stop):
    """Our naming, with `torch` for `trace` (proc_trace_name in C)."""
    return os.path.join(log_dir, F.NPUTRACE_TORCH_NAME.format(pid=pid, rank=max(rank, 0), start=start, stop=stop))


# ------------------------------------------------------------------ analysis
def load(path):
    # imported here: the training process imports this module; the reader is needed only
    # when a window is analysed
    from .analysis import load_trace, trace_events  # pylint: disable=import-outside-toplevel
    return trace_events(load_trace(path)) or []


def _self_times(events):
    """Self time of nested X events on one (pid, tid): duration minus the direct children."""
    out = {}
    tracks = {}
    for i, e in enumerate(events):
        tracks.setdefault((e["pid"], e["tid"]), []).append(i)
    for idx in tracks.values():
        idx.sort(key=lambda i: (float(events[i]["ts"]), -float(events[i].get("dur", 0))))
        stack = []
        for i in idx:
            ts, dur = float(events[i]["ts"]), float(events[i].get("dur", 0))
            while stack and ts >= stack[-1][1]:
                stack.pop()
            out[i] = dur
            if stack:
                parent = stack[-1][0]
                out[parent] -= min(dur, stack[-1][1] - ts)
            stack.append((i, ts + dur))
    return out


def _top(rows, key):
    return sorted(rows, key=lambda r: (-r[key], r["name"]))[:TOP_N]


def _is_device(e):
    return e.get("cat") in F.TRACE_DEVICE_CATS


def analyse_events(events):
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e]
    steps = []
    for e in xs:
        n = F.step_number(e.get("name", ""))
        if n is not None and not _is_device(e) and e.get("cat") != F.TRACE_DEVICE_ANNOTATION:
            steps.append({"step": n, "wall_us": round(float(e.get("dur", 0)), 3)})
    steps.sort(key=lambda s: s["step"])
    self_t = _self_times(xs)
    kern, ops = {}, {}
    for i, e in enumerate(xs):
        cat = e.get("cat", "")
        name = str(e.get("name", ""))
        if cat in F.TRACE_KERNEL_CATS:
            tab = kern
        elif (cat in F.TRACE_HOST_OP_CATS or not cat) and \
                F.step_number(name) is None:  # no cat: torch's legacy (non-Kineto) profiler
            tab = ops
        else:
            continue
        r = tab.setdefault(name, {"name": name, "count": 0, "total_us": 0.0, "self_us": 0.0})
        r["count"] += 1
        r["total_us"] += float(e.get("dur", 0))
        r["self_us"] += self_t.get(i, 0.0)
    for tab in (kern, ops):
        for r in tab.values():
            r["total_us"] = round(r["total_us"], 3)
            r["self_us"] = round(r["self_us"], 3)
    # Stream work only (memory allocations are not); each share is a union of intervals per
    # stream, so overlapping records of one op (msPTI's Hccl + Communication) count once.
    dev = [e for e in xs if _is_device(e) and e.get("cat") != F.TRACE_MEMORY_CAT]

    def union(pred):
        per = {}
        for e in dev:
            if pred(e):
                per.setdefault((e["pid"], e["tid"]), []).append(
                    (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
        total = 0.0
        for iv in per.values():
            iv.sort()
            s0, e0 = iv[0]
            for s1, e1 in iv[1:]:
                if s1 > e0:
                    total += e0 - s0
                    s0, e0 = s1, e1
                else:
                    e0 = max(e0, e1)
            total += e0 - s0
        return total

    busy = union(lambda e: True)
    comm = union(lambda e: e.get("args", {}).get("kind") in F.COMM_KINDS or
                 re.search(r"nccl|hccl", str(e.get("name", "")), re.I))
    mem = union(lambda e: e.get("cat") in F.TRACE_COPY_CATS)
    streams = {}
    for e in dev:
        streams.setdefault((e["pid"], e["tid"]), []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    idle = []
    for (pid, tid), iv in sorted(streams.items()):
        iv.sort()
        gaps, end = [], iv[0][1]
        for s, t in iv[1:]:
            if s > end:
                gaps.append(s - end)
            end = max(end, t)
        span = end - iv[0][0]
        idle.append({"device": pid, "stream": tid, "span_us": round(span, 3), "busy_events": len(iv),
                     "idle_us": round(sum(gaps), 3), "gaps": len(gaps), "max_gap_us": round(max(gaps, default=0.0), 3),
                     "idle_share": round(sum(gaps) / span, 4) if span > 0 else 0.0})
    return {
        "steps": steps,
        "top_kernels_by_total": _top(kern.values(), "total_us"),
        "top_kernels_by_self": _top(kern.values(), "self_us"),
        "top_ops_by_total": _top(ops.values(), "total_us"),
        "top_ops_by_self": _top(ops.values(), "self_us"),
        "device_busy_us": round(busy, 3),
        "communication_share": round(comm / busy, 4) if busy else 0.0,
        "memcpy_share": round(mem / busy, 4) if busy else 0.0,
        "idle_gaps": idle,
    }


def format_text(path, a):
    lines = [f"msmonitor nputrace analysis of {os.path.basename(path)}", ""]
    lines.append("step  wall_us")
    lines += [f"{s['step']:>4}  {s['wall_us']:.3f}" for s in a["steps"]] or ["(no step ranges)"]
    for title, key in (("top kernels by total time", "top_kernels_by_total"), ("top ops by self time", "top_ops_by_self")):
        lines += ["", f"{title}:", f"{'total_us':>12} {'self_us':>12} {'count':>6}  name"]
        lines += [f"{r['total_us']:>12.3f} {r['self_us']:>12.3f} {r['count']:>6}  {r['name'][:80]}" for r in a[key]]
    lines += ["", f"device busy {a['device_busy_us']:.3f} us; communication {a['communication_share'] * 100:.1f} %, "
                  f"memcpy/memset {a['memcpy_share'] * 100:.1f} %", "",
              "device stream      idle_us  gaps  max_gap_us  idle_share"]
    lines += [f"{g['device']:>6} {g['stream']:>6} {g['idle_us']:>12.3f} {g['gaps']:>5} {g['max_gap_us']:>11.3f}"
              f"  {g['idle_share']:.4f}" for g in a["idle_gaps"]]
    return "\n".join(lines) + "\n"


def analyse_file(path):
    """Write <trace>_analysis.json / .txt next to the trace (temporary names renamed into
    place, like the traces); returns the JSON path."""
    a = analyse_events(load(path))
    a["trace"] = os.path.basename(path)
    stem = re.sub(r"\.json(\.gz)?$", "", path)
    for ext, text in (("json", json.dumps(a, indent=1, sort_keys=True) + "\n"), ("txt", format_text(path, a))):
        dst = f"{stem}_analysis.{ext}"
        with open(dst + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(dst + ".tmp", dst)
    return f"{stem}_analysis.json"


def _trace_paths(args):
    for p in args:
        if os.path.isdir(p):
            for n in sorted(os.listdir(p)):
                if F.NPUTRACE_FILE_RE.match(n):
                    yield os.path.join(p, n)
        else:
            yield p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "analyse":
        print("usage: python -m msmonitor analyse TRACE_OR_DIR...", file=sys.stderr)
        return 2
    rc = 0
    for p in _trace_paths(argv[1:]):
        try:
            out = analyse_file(p)
            print(f"analysis of {p} written to {out}")
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"[ERROR] cannot analyse {p}: {err}", file=sys.stderr)
            rc = 1
    return rc


# ------------------------------------------------------------------ the window (per step)
class _Job:
    """Work handed to the window's worker thread; `done` is set when it ran, `path` is its result."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args
        self.done = threading.Event()
        self.path = None

    def run(self):
        try:
            self.path = self.fn(*self.args)
        finally:
            self.done.set()


class Window:
    """Follows the C window at every step where it moved: torch.profiler over it, analysis at
    its end.

    --async-mode: the window's end costs the step only torch.profiler's own stop (it must run
    on the thread that started the profiler, and it builds the events: torch's cost, not ours);
    the export of its trace and the hand-off to the analysis child (a fork/exec: milliseconds in
    a large process) run on one worker thread, started when the window is armed so that even
    the thread's start is not on the closing step (docs/nputrace.md#analysis---analyse---async-mode)."""

    def __init__(self, dyn):
        self.dyn = dyn
        self.seen = None          # (windows, start, stop) acted on
        self.prof = None
        self.torch_path = None
        self.children = []        # async analysis processes
        self.lock = threading.Lock()  # children: appended by the worker
        self.jobs = queue.SimpleQueue()
        self.worker = None        # --async-mode worker thread (started once)
        self.pending = None       # (start, stop, torch path or _Job, flags): analysis waiting for our file
        # Something to follow at every step whatever the window does (an analysis waiting for
        # its files, children to reap); otherwise after_step() runs only when the window moved.
        # Set under the lock, as the worker appends children.
        self.busy = False

    def _start_torch(self, info):
        try:
            import torch.profiler as tp  # pylint: disable=import-outside-toplevel
        except ImportError:
            _log("WARNING", "--activities CPU: torch is not importable; no torch.profiler trace")
            return
        f = info["flags"]
        try:
            self.prof = tp.profile(activities=[tp.ProfilerActivity.CPU],
                                   record_shapes=bool(f & F.TRACE_RECORD_SHAPES),
                                   profile_memory=bool(f & F.TRACE_PROFILE_MEMORY),
                                   with_stack=bool(f & F.TRACE_WITH_STACK), with_flops=bool(f & F.TRACE_WITH_FLOPS),
                                   with_modules=bool(f & F.TRACE_WITH_MODULES))
            self.prof.__enter__()
        except Exception as err:  # noqa: BLE001 - never break the training step
            _log("ERROR", f"torch.profiler did not start: {err}")
            self.prof = None
            return
        self.torch_path = torch_trace_name(info["log_dir"], os.getpid(), info["rank"], info["start"], info["stop"])
        _log("INFO", f"torch.profiler started for steps [{info['start']}, {info['stop']}) (record_shapes="
                     f"{bool(f & F.TRACE_RECORD_SHAPES)}, profile_memory={bool(f & F.TRACE_PROFILE_MEMORY)}, "
                     f"with_stack="
                     f"{bool(f & F.TRACE_WITH_STACK)}, with_flops={bool(f & F.TRACE_WITH_FLOPS)}, with_modules="
                     f"{bool(f & F.TRACE_WITH_MODULES)})")

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job.run()

    def _submit(self, fn, *args):
        """Run fn(*args) on the worker (started here if it is not yet); returns the _Job."""
        if self.worker is None:
            self.worker = threading.Thread(target=self._work, name="msmonitor-nputrace", daemon=True)
            self.worker.start()
        job = _Job(fn, *args)
        self.jobs.put(job)
        return job

    def _stop_torch(self, background=False):
        """Stop torch.profiler on the stepping thread and export its trace: on the worker with
        background (returns the _Job whose `path` is the written trace), else here (returns the
        path, or None when it failed)."""
        prof, self.prof = self.prof, None
        try:
            prof.__exit__(None, None, None)
        except Exception as err:  # noqa: BLE001 - never break the training step
            _log("ERROR", f"torch.profiler did not stop: {err}")
            return None
        if background:
            return self._submit(_export_torch, prof, self.torch_path)
        return _export_torch(prof, self.torch_path)

    def _analyse(self, info, paths):
        paths = [p for p in paths if p and os.path.exists(p)]
        if not paths:
            return
        if info["flags"] & F.TRACE_ASYNC:
            self._submit(self._spawn_analysis, paths)
            return
        for p in paths:
            try:
                _log("INFO", f"analysis written to {analyse_file(p)}")
            except (OSError, ValueError, KeyError, TypeError) as err:
                _log("ERROR", f"cannot analyse {p}: {err}")

    def _spawn_analysis(self, paths):
        """Worker: start the analysis child (reaped by a later step, waited for at exit)."""
        env = dict(os.environ)
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
        try:
            child = subprocess.Popen([sys.executable, "-c", _CHILD, "analyse", *paths], env=env,
                                     stdin=subprocess.DEVNULL, close_fds=True)
        except OSError as err:
            _log("ERROR", f"analysis of {len(paths)} trace(s) not started: {err}")
            return None
        with self.lock:
            self.children.append(child)
            self.busy = True      # reaped by the steps from now on
        _log("INFO", f"analysis of {len(paths)} trace(s) running in child process {child.pid}")
        return None

    def after_step(self):
        with self.lock:
            self.children = [c for c in self.children if c.poll() is None]
        info = self.dyn.trace_info()
        key = (info["windows"], info["start"], info["stop"])
        asynchronous = bool(info["flags"] & F.TRACE_ASYNC)
        if asynchronous and self.worker is None and info["state"] in (F.TRACE_READY, F.TRACE_RUNNING):
            self._submit(lambda: None)  # start the worker now, not on the closing step
        if info["state"] == F.TRACE_RUNNING and self.seen != key:
            self.seen = key
            if info["flags"] & F.TRACE_CPU:
                self._start_torch(info)
        elif info["state"] != F.TRACE_RUNNING and self.seen is not None and self.seen[0] == info["windows"]:
            torch_path = self._stop_torch(background=asynchronous) if self.prof is not None else None
            window = self.seen
            self.seen = (None,) + window[1:]  # handled; a new window changes `windows`
            if info["flags"] & F.TRACE_ANALYSE:
                self.pending = (window[1], window[2], torch_path, info["flags"])
        self._analyse_when_written(info)
        with self.lock:
            self.busy = self.pending is not None or bool(self.children)

    def _analyse_when_written(self, info, force=False):
        """libmsmonitor writes its trace on its session thread after the window closed, and
        --async-mode exports torch.profiler's on the worker: the analysis starts at the first
        step that sees both files (or at exit)."""
        if self.pending is None:
            return
        start, stop, torch_path, flags = self.pending
        if isinstance(torch_path, _Job):
            if not torch_path.done.is_set() and not force:
                return
            torch_path.done.wait()
            torch_path = torch_path.path
        tag = F.NPUTRACE_WINDOW_TAG.format(start=start, stop=stop)
        ours = info["last_trace"] if tag in info["last_trace"] else None
        if ours is None and flags & F.TRACE_NPU and not force:
            return
        self.pending = None
        self._analyse(dict(info, flags=flags), [ours, torch_path])

    def finish(self, timeout=60):
        """At exit: end a window still open (the C side writes its partial trace), let the worker
        finish its exports and hand-offs, and wait for the analysis children, so none outlives
        the job."""
        if self.prof is not None:
            self._stop_torch()
        if self.pending is not None:
            for _ in range(300):  # the trace of a window that just closed is being written
                info = self.dyn.trace_info()
                if F.NPUTRACE_WINDOW_TAG.format(start=self.pending[0], stop=self.pending[1]) in info["last_trace"]:
                    break
                time.sleep(0.1)
            self._analyse_when_written(self.dyn.trace_info(), force=True)
        if self.worker is not None:
            self.jobs.put(None)
            self.worker.join(timeout)
            self.worker = None
        with self.lock:
            children, self.children = self.children, []
            self.busy = False
        for c in children:
            try:
                c.wait(timeout)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()


if __name__ == "__main__":
    sys.exit(main())
