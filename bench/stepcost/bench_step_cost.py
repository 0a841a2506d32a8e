"""bench_step_cost: what msmonitor's control path costs a training step
(docs/benchmarks.md#the-always-on-cost-of-a-step).

Three child processes run the same loop side by side, one per mode:
- a real PyTorch loop when /usr/bin/python3 can import torch (Debian's 1.13, CPU, one thread):
  a 64-wide MLP, batch 32 — `optimizer`: forward, backward and torch.optim.SGD.step() (the
  optimizer step hook), `forward`: a forward-only inference loop (the forward hook);
- otherwise the simulator's own training loop calling dynamic_profile.step() (`loop`);
- plain: no msmonitor at all;
- idle: MSMONITOR_USE_DAEMON=1, dynamic_profile.init(), registered with a running dynolog,
  no config;
- session: the same with an npu-monitor session started through its own dynolog by `dyno
  npu-monitor` (kind Marker, report interval 1 s): its only records are the step markers.
The headline figure is paired inside one process, since two processes of the same loop differ
in speed by more than the target on a shared VM: each child runs pairs of consecutive steps,
one with msmonitor's per-step work ON (the hook init() installed, calling dynamic_profile.step()'s
C whole) and one OFF (the hook taken out: the bare loop), the order alternating from pair to
pair (ABBA), and the parent prints per child the OFF steps' median (the bare loop of the same
run) and the median over the pairs of ON - OFF, in µs and in % of the step. Two steps in a row
see the same load, so the pairs' differences do not carry the drift that blocks of steps did.
libmsmonitor must have stepped once per ON step and never in an OFF one. In the plain child both
halves are bare (the method's noise); in the session child the session's threads run in both
halves, and ON includes the step markers' records.

The second figure compares the processes: rounds run one block of steps per mode, back to
back, the order rotating, so the three see the same load; each block reports its median step
(wall) and the training thread's CPU time per step. Printed per mode: the median over the
rounds, and the median of the same-round differences to plain in µs and in % of the plain
step. libmsmonitor's step count must equal the loop's ON steps (steps stay exact). Then where
one step's time goes in our code: the Python layers timed alone in the session child (hook,
step(), C step, window) and the C step's parts timed alone by bench_step_parts (markers,
segment, window, health).

Usage: /usr/bin/python3 bench/stepcost/bench_step_cost.py [--build DIR] [--steps N per block]
       [--rounds R] [--sets S] [--warmup N] [--pairs P]
       [--hooks optimizer,forward] [--no-torch] [--smoke] [--instructions]"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODES = ("plain", "idle", "session")
NOREC = "session, markers recording nothing"   # the session child's second paired sequence
PYHOOKS = "idle-py"   # an idle child on the previous version's per-step path, the paired figure's
#                       baseline: the Python step() as the callback and, optimizer, the Python wrapper
SESSION_ARGS = ("npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Marker", "--report-interval-s", "1")


# ------------------------------------------------------------------ the child: one loop
def _model(torch):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    return model, torch.randn(32, 64), torch.randn(32, 1)


def _torch_step(torch, hook):
    model, x, y = _model(torch)
    if hook == "optimizer":
        opt = torch.optim.SGD(model.parameters(), lr=0.001)
        loss_fn = torch.nn.functional.mse_loss

        def one():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return one, {"model": model, "x": x, "opt": opt}
    model.eval()
    torch.set_grad_enabled(False)   # an inference worker: no autograd at all

    def one():
        model(x)
    return one, {"model": model, "x": x}


def _log_says(text):
    d = os.path.join(os.environ["MSMONITOR_LOG_PATH"], "msmonitor_log")
    try:
        for n in os.listdir(d):
            if n.endswith(f".{os.getpid()}.log"):
                with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                    if text in f.read():
                        return True
    except OSError:
        pass
    return False


class Child:
    """One loop in one mode. After its set-up (the session started through the daemon, the
    warm-up steps) it prints "ready" and then takes commands on stdin: `run N` times the next N
    steps and answers their median wall time and CPU time per step; `pairs P [norec]` runs P
    pairs of steps, msmonitor's per-step work on in one and off in the other (ABBA), and answers
    the pairs' figures and libmsmonitor's steps meanwhile; `parts` answers the breakdown; `quit`
    ends the loop. Everything else it says goes to stderr."""

    def __init__(self, mode, hook, warmup):
        self.mode, self.hook, self.warmup = mode, hook, warmup
        self.done = 0
        self.phase = "setup"
        self.dyno = None
        self.dp = None
        self.objs = {}
        self.extra_steps = 0      # step() calls of the breakdown, not of the loop
        self.off_steps = 0        # loop steps run with msmonitor's per-step work taken out
        self.seq = None           # the on/off sequence of a `pairs` command, one per step
        self.set_work = None      # set_work(on): msmonitor's per-step work in place or taken out
        self.step_fn = None       # what the simulator's loop calls at each step
        self.norec = None         # (simulator, its suppressed count) while markers record nothing
        self.deadline = time.monotonic() + 120

    def reply(self, obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    # called after every step of the loop; returns False to stop
    def after(self):
        now = time.perf_counter_ns()
        if self.phase == "pairs":
            cpu = time.thread_time_ns()
            self.wall.append(now - self.last)
            self.cpu.append(cpu - self.cpu_last)
            k = len(self.wall)
            if k < len(self.seq):
                # switched between the steps, outside the timed span; nothing else of ours runs
                # between them (a libmsmonitor call here would warm our own data for ON)
                self.set_work(self.seq[k])
                self.cpu_last = time.thread_time_ns()
                self.last = time.perf_counter_ns()
                return True
            self.set_work(True)                # between commands the loop is as init() left it
            self.reply(self._pairs_result())
            return self.command()
        if self.phase == "timed":
            self.wall.append(now - self.last)
            self.done += 1
            if self.done < self.n:
                self.last = time.perf_counter_ns()
                return True
            self.reply(self._block_result())
            return self.command()
        self.done += 1
        if time.monotonic() > self.deadline:
            raise SystemExit(f"{self.mode}: stuck in phase {self.phase}")
        if self.phase == "setup" and self.done % 20 == 0:
            self._advance()
        if self.phase == "warmup" and self.done >= self.warm_until:
            self.reply({"ready": True})
            return self.command()
        return True

    def _block_result(self):
        cpu = (time.thread_time_ns() - self.cpu0) / self.n
        self.wall.sort()
        return {"wall_ns": statistics.median(self.wall), "p10_ns": self.wall[len(self.wall) // 10], "cpu_ns": cpu}

    def _pairs_result(self):
        """Per pair ON - OFF of wall and CPU time; the OFF steps' median and 10th percentile;
        libmsmonitor's steps meanwhile (one per ON step)."""
        n = len(self.seq) // 2
        d, dcpu, off = [], [], []
        for i in range(n):
            a, b = 2 * i, 2 * i + 1
            on, of = (a, b) if self.seq[a] else (b, a)
            d.append(self.wall[on] - self.wall[of])
            dcpu.append(self.cpu[on] - self.cpu[of])
            off.append(self.wall[of])
        d.sort()
        off.sort()
        cut = n // 10
        res = {"pairs": n, "off_ns": statistics.median(off), "off_p10_ns": off[cut], "d_ns": statistics.median(d),
               "d_tmean_ns": statistics.mean(d[cut:n - cut] or d), "dcpu_ns": statistics.median(dcpu)}
        self.off_steps += n
        if self.dp is not None:
            res["lib_steps"] = self._lib_step() - self.lib0
        if self.norec is not None:
            res["suppressed"] = self._norec(False)
        return res

    def _norec(self, start):
        """The simulator records no marker (its default domain disabled, as msPTI's
        msptiActivityDisableMarkerDomain does): the step's marker calls still run, ours and the
        simulator's entry points, but no record is made, no device thread woken. Returns, at
        the end, how many marker calls the simulator suppressed meanwhile."""
        if start:
            import mssim  # pylint: disable=import-outside-toplevel
            sim = mssim.load()   # the copy the plugin loaded (the same path: dlopen's handle)
            self.norec = (sim, sim.stats()["records_suppressed_domain"])
            if sim.lib.msptiActivityDisableMarkerDomain(b"default") != 0:
                raise SystemExit(f"{self.mode}: the simulator's default marker domain could not be disabled")
            return 0
        sim, before = self.norec
        self.norec = None
        if sim.lib.msptiActivityEnableMarkerDomain(b"default") != 0:
            raise SystemExit(f"{self.mode}: the simulator's default marker domain could not be enabled again")
        return sim.stats()["records_suppressed_domain"] - before

    def _lib_step(self):
        return self.dp._STATE.info()["step"]  # pylint: disable=protected-access

    def command(self):
        """Wait for the parent's next command (between blocks: the step is not running)."""
        while True:
            line = sys.stdin.readline().split()
            if not line or line[0] == "quit":
                self.phase = "done"
                return False
            if line[0] == "parts":
                before = self._lib_step()
                parts = _parts(self.dp, self.hook, self.objs, int(line[1]))
                self.extra_steps += self._lib_step() - before
                self.reply(parts)
                continue
            self.n = int(line[1])
            if line[0] == "pairs":
                # pairs of steps with the per-step work on and off, ABBA: on off, off on, ...
                if self.set_work is None:
                    self.set_work = _work_switch(self)
                if line[2:] == ["norec"]:
                    self._norec(True)
                self.seq = [on for i in range(self.n) for on in ((True, False) if i % 2 == 0 else (False, True))]
                if self.dp is not None:
                    self.lib0 = self._lib_step()
                self.wall, self.cpu = [], []
                self.phase = "pairs"
                self.set_work(self.seq[0])
                self.cpu_last = time.thread_time_ns()
                self.last = time.perf_counter_ns()
                return True
            self.done, self.wall = 0, []
            self.phase = "timed"
            self.cpu0 = time.thread_time_ns()
            self.last = time.perf_counter_ns()
            return True

    def _advance(self):
        if self.mode == "plain":
            return self._warm()
        info = self.dp._STATE.info()  # pylint: disable=protected-access
        if not info.get("polling") and not info.get("registered"):
            return None
        if self.mode == "idle":
            return self._warm()
        if self.dyno is None:
            # a config is read once its whole second has passed: start it in a new second
            t = int(time.time())
            if int(time.time()) == t:
                time.sleep(max(0.0, t + 1.001 - time.time()))
            self.dyno = subprocess.Popen(json.loads(os.environ["BENCH_DYNO"]) + list(SESSION_ARGS),
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            return None
        if self.dyno.poll() is None or not _log_says("MsptiMonitor start successfully"):
            return None
        out = self.dyno.stdout.read()
        if '"commandStatus":"effective"' not in out:
            raise SystemExit(f"dyno npu-monitor did not start the session: {out}")
        return self._warm()

    def _warm(self):
        self.phase = "warmup"
        self.warm_until = self.done + self.warmup

    def summary(self, loop_steps):
        res = {"mode": self.mode, "loop_steps": loop_steps}
        if self.dp is not None:
            res["lib_step"] = self._lib_step() - self.extra_steps
            res["off_steps"] = self.off_steps
        return res


def child_main(mode, hook, warmup):
    py = mode == PYHOOKS
    c = Child("idle" if py else mode, hook, warmup)
    if mode != "plain":
        from msmonitor import dynamic_profile  # pylint: disable=import-outside-toplevel
        c.dp = dynamic_profile
    if hook == "loop":
        return _sim_child(c)
    import torch  # pylint: disable=import-outside-toplevel
    one, c.objs = _torch_step(torch, hook)
    if py:
        from msmonitor import step_hook  # pylint: disable=import-outside-toplevel
        step_hook._USE_C = hook != "optimizer"  # pylint: disable=protected-access
    if c.dp is not None and not c.dp.init():
        raise SystemExit("dynamic_profile.init() did not join dyno mode")
    if py:   # the Python step() as the callback, as before dynamic.tick
        if hook == "forward":
            step_hook.install_forward(None, c.dp.step)
        else:
            step_hook._set_callback(c.dp.step)  # pylint: disable=protected-access
    total = 0
    while True:
        one()
        total += 1
        if not c.after():
            break
    c.reply(c.summary(total))
    return 0


def _sim_child(c):
    import mssim  # pylint: disable=import-outside-toplevel
    sim = mssim.load()
    if c.dp is not None and not c.dp.init():
        raise SystemExit("dynamic_profile.init() did not join dyno mode")
    c.step_fn = c.dp.step if c.dp is not None else (lambda: None)
    total = [0]

    def on_step(_n):
        c.step_fn()
        total[0] += 1
        if not c.after():
            sim.stop_workload()
    sim.run_workload(on_step_end=on_step, steps=0, steps_per_s=0, step_markers=0, kernel_scale=0.02)
    c.reply(c.summary(total[0]))
    return 0


def _ours(fn):
    """True when fn, or a function it wraps, is step_hook's optimizer step wrapper."""
    from msmonitor import step_hook  # pylint: disable=import-outside-toplevel
    seen = 0
    while fn is not None and seen < 20:
        if step_hook._is_wrapper(fn):  # pylint: disable=protected-access
            return True
        fn, seen = getattr(fn, "__wrapped__", None), seen + 1
    return False


def _work_switch(c):
    """set_work(on) for the paired measurement: on puts msmonitor's per-step work in place as
    init() installed it (the hook, which calls dynamic_profile.step()); off takes it out, so the
    loop runs none of our code: the bare loop in the same process. The plain process has no
    work: both halves are the bare loop (the method's null)."""
    if c.dp is None:
        return lambda on: None
    if c.hook == "loop":
        step, noop = c.dp.step, (lambda: None)

        def set_loop(on):
            c.step_fn = step if on else noop
        return set_loop
    from msmonitor import step_hook  # pylint: disable=import-outside-toplevel
    if c.hook == "forward":
        # between steps torch's global tables hold only our module-wide pre hook (the
        # outermost module's own hooks come and go within a forward)
        import torch.nn.modules.module as mm  # pylint: disable=import-outside-toplevel
        pre, post = mm._global_forward_pre_hooks, mm._global_forward_hooks  # pylint: disable=protected-access
        model = c.objs["model"]
        saved = dict(pre)
        if not step_hook.forward_installed() or not saved or post:
            raise SystemExit(f"{c.mode}: the forward hook is not the only global module hook ({saved}, {dict(post)})")

        def set_fwd(on):
            if model._forward_pre_hooks or model._forward_hooks:  # pylint: disable=protected-access
                raise SystemExit(f"{c.mode}: a root module hook outlived its forward")
            pre.clear()
            if on:
                pre.update(saved)
        return set_fwd
    cls = type(c.objs["opt"])
    if step_hook.mode() == "wrap":
        on_fn = cls.__dict__.get("step")
        off_fn = getattr(on_fn, "__wrapped__", None)
        if not _ours(on_fn) or off_fn is None or _ours(off_fn):
            raise SystemExit(f"{c.mode}: {cls.__name__}.step is not msmonitor's wrapper around the bare step")

        def set_wrap(on):
            cls.step = on_fn if on else off_fn
        return set_wrap
    import torch.optim.optimizer as oo  # pylint: disable=import-outside-toplevel
    table = oo._global_optimizer_post_hooks  # pylint: disable=protected-access
    saved = dict(table)
    if list(saved.values()) != [step_hook._post_hook]:  # pylint: disable=protected-access
        raise SystemExit(f"{c.mode}: the optimizer post hooks are not msmonitor's alone ({saved})")

    def set_post(on):
        table.clear()
        if on:
            table.update(saved)
    return set_post


def _per_call(fn, n, reps=7):
    """ns per call of fn(), about n calls in all: the lowest mean of short batches (one that no
    other process interrupted; a batch shorter than a scheduler slice has that chance)."""
    batch = min(n, 500)
    reps = max(reps, n // batch)
    best = None
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        v = (time.perf_counter_ns() - t0) / batch
        best = v if best is None else min(best, v)
    return best


def _parts(dp, hook, objs, n):
    """The Python layers of one step, each timed alone in this (session) process."""
    from msmonitor import step_hook  # pylint: disable=import-outside-toplevel
    dyn = dp._dynamic()              # pylint: disable=protected-access
    state = dp._STATE                # pylint: disable=protected-access
    noop = lambda: None              # noqa: E731
    base = _per_call(noop, n)
    out = {}
    # The first thousands of back-to-back steps of a session process run slower (its marker
    # records wake the consumer threads): warmed up first, then whole and C step alternate, so
    # neither gets that start or a later burst of load alone.
    _per_call(dp.step, n)
    whole, tick, c_step = [], [], []
    for _ in range(5):
        whole.append(_per_call(dp.step, max(1, n // 5)))
        tick.append(_per_call(state.tick, max(1, n // 5)))
        c_step.append(_per_call(dyn.step, max(1, n // 5)))
    whole, tick, c_step = min(whole) - base, min(tick) - base, min(c_step) - base
    out["step() by hand (dynamic_profile.step)"] = whole
    out["the hooks' callback (IPCMonitor_C.dynamic.tick)"] = tick
    out["  C step (IPCMonitor_C.dynamic.step)"] = c_step
    out["  window check (tick less the C step)"] = tick - c_step
    if state.window is not None:
        # dynamic_profile reads the window only at a step where it moved: not per step
        out["window read (nputrace after_step; only when it moved)"] = _per_call(state.window.after_step, n) - base
    # the hook with a no-op callback in place of step()
    if hook == "optimizer":
        opt = objs["opt"]
        saved = step_hook._state["callback"]         # pylint: disable=protected-access
        step_hook._set_callback(noop)                # pylint: disable=protected-access
        try:
            if step_hook.mode() == "wrap":
                raw = lambda self: None              # noqa: E731
                wrapped = step_hook._wrap_step(raw)  # pylint: disable=protected-access
                out["hook (optimizer step wrapper, no-op callback)"] = \
                    _per_call(lambda: wrapped(opt), n) - _per_call(lambda: raw(opt), n)
            else:
                out["hook (optimizer post hook, no-op callback)"] = \
                    _per_call(lambda: step_hook._post_hook(opt, (), {}), n) - base  # pylint: disable=protected-access
        finally:
            step_hook._set_callback(saved)           # pylint: disable=protected-access
    else:
        import torch.nn.modules.module as mm  # pylint: disable=import-outside-toplevel
        model, x = objs["model"], objs["x"]
        step_hook.install_forward(None, noop)     # the C hooks' callback too
        pre, post = dict(mm._global_forward_pre_hooks), dict(mm._global_forward_hooks)  # pylint: disable=protected-access
        hooked, bare = [], []
        try:
            for _ in range(max(31, n // 100)):  # interleaved short batches: a change of load hits both alike
                hooked.append(_per_call(lambda: model(x), 10, reps=1))
                mm._global_forward_pre_hooks.clear()    # pylint: disable=protected-access
                mm._global_forward_hooks.clear()        # pylint: disable=protected-access
                bare.append(_per_call(lambda: model(x), 10, reps=1))
                mm._global_forward_pre_hooks.update(pre)  # pylint: disable=protected-access
                mm._global_forward_hooks.update(post)     # pylint: disable=protected-access
        finally:
            mm._global_forward_pre_hooks.update(pre)  # pylint: disable=protected-access
            mm._global_forward_hooks.update(post)     # pylint: disable=protected-access
            step_hook.install_forward(None, dp._STATE.tick)  # pylint: disable=protected-access
        # each pair of batches ran back to back: the median of their differences
        hooked, bare = statistics.median(h - b for h, b in zip(hooked, bare)), 0.0
        out["hook (module forward hooks, no-op callback)"] = hooked - bare
    return {k: out[k] for k in sorted(out, key=lambda k: not k.startswith("hook"))}


# ------------------------------------------------------------------ instruction counts
SESSION_CFG = {"NPU_MONITOR_START": "true", "MSPTI_ACTIVITY_KIND": "Marker", "REPORT_INTERVAL_S": "1"}


def cg_child(hook, n):
    """Under callgrind (--dump-before=getpgrp): regions of n calls, each between two
    os.getpgrp() calls, in one process; prints the regions' names (JSON) last."""
    import mmap  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    from msmonitor import dynamic_profile as dp, step_hook  # pylint: disable=import-outside-toplevel
    one, objs = _torch_step(torch, hook)
    names = []
    noop = lambda: None  # noqa: E731

    def region(name, fn):
        for _ in range(5):
            fn()
        os.getpgrp()
        for _ in range(n):
            fn()
        os.getpgrp()
        names.append(name)

    region("empty", noop)
    region("plain", one)
    if not dp.init():
        raise SystemExit("dynamic_profile.init() did not join dyno mode")
    region("idle", one)
    dyn = dp._dynamic()  # pylint: disable=protected-access
    region("step()", dp.step)
    region("C step", dyn.step)
    if hook == "optimizer":
        saved = step_hook._state["callback"]  # pylint: disable=protected-access
        step_hook._set_callback(noop)         # pylint: disable=protected-access
        region("hook", one)
        step_hook._set_callback(saved)        # pylint: disable=protected-access
    else:
        step_hook.install_forward(None, noop)
        region("hook", one)
        step_hook.install_forward(None, dp._STATE.tick)  # pylint: disable=protected-access
    # the session: a config in the segment as the creator's poller writes it
    fd = os.open(dp._STATE.path, os.O_RDWR)  # pylint: disable=protected-access
    mm = mmap.mmap(fd, dp.SHM_SIZE)
    t = int(time.time())
    while int(time.time()) <= t:
        time.sleep(0.05)
    dp.write_config(mm, dict(SESSION_CFG, is_valid=True))
    deadline = time.monotonic() + 600
    while not _log_says("MsptiMonitor start successfully"):
        one()
        if time.monotonic() > deadline:
            raise SystemExit("the session did not start")
    region("session", one)
    region("C step, session", dyn.step)
    print(json.dumps(names), flush=True)
    return 0


def cg_measure(args, tmp, daemon, hook):
    """Instructions per call of each region of cg_child, main thread only."""
    out = os.path.join(tmp, f"cg.{hook}.out")
    env = child_env(args, tmp, daemon, "idle", hook, f"bench-cg-{hook}")
    env["MSMONITOR_STEP_HOOK"] = hook
    r = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", "--dump-before=getpgrp",
                        f"--callgrind-out-file={out}", PYTHON, os.path.abspath(__file__), "--child-cg", hook,
                        "--steps", str(args.cg_steps)], env=env, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"callgrind run failed ({r.returncode}):\n{r.stderr[-3000:]}")
    names = json.loads(r.stdout.strip().splitlines()[-1])
    res = {}
    for i, name in enumerate(names):
        with open(f"{out}.{2 * i + 2}-01", encoding="utf-8") as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
        res[name] = total / args.cg_steps
    return res


def print_cg(hook, r):
    plain = r["plain"] - r["empty"]
    print(f"instructions per step (callgrind, training thread), {hook} hook:")
    for mode in MODES:
        v = r[mode] - r["empty"]
        print(f"  {mode:<8} {v:12.0f} {v - plain:+10.0f} {(v - plain) * 100 / plain:+7.2f}%")
    print(f"  of which: hook {r['hook'] - r['plain']:.0f} (no-op callback), step() {r['step()'] - r['empty']:.0f} "
          f"(C step {r['C step'] - r['empty']:.0f}; with the session {r['C step, session'] - r['empty']:.0f})",
          flush=True)


# ------------------------------------------------------------------ the parent
def free_port():
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::", 0))
        return s.getsockname()[1]


class Daemon:
    """dynolog with its sockets (the Kineto one too) in a directory of its own, so several run
    side by side without a private network namespace."""

    def __init__(self, build, tmp, name):
        self.sockdir = os.path.join(tmp, name)
        os.makedirs(self.sockdir)
        self.port = free_port()
        self.log = os.path.join(tmp, f"{name}.log")
        self.env = dict(os.environ, MSMONITOR_SOCKET_DIR=self.sockdir, HOME=self.sockdir,
                        KINETO_IPC_SOCKET_DIR=self.sockdir)
        with open(self.log, "wb") as f:
            self.p = subprocess.Popen([os.path.join(build, "src", "daemon", "dynolog"), "--port", str(self.port),
                                       "--enable_ipc_monitor"], env=self.env, stdout=f, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(self.sockdir, "dynolog.sock")):
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"dynolog did not start:\n{open(self.log, encoding='utf-8').read()[-2000:]}")
            time.sleep(0.02)
        self.dyno = [os.path.join(build, "src", "cli", "dyno"), "--hostname", "localhost", "--port", str(self.port)]

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def torch_importable():
    r = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, timeout=300)
    return r.returncode == 0


def child_env(args, tmp, daemon, mode, hook, key):
    env = dict(os.environ)
    for k in ("MSMONITOR_USE_DAEMON", "KINETO_USE_DAEMON", "MSMONITOR_STEP_HOOK"):
        env.pop(k, None)
    env.update(PYTHONPATH=os.pathsep.join(p for p in (os.path.join(args.build, "python", "pkg"),
                                                      os.environ.get("PYTHONPATH")) if p),
               MSMONITOR_MSPTI_LIB=os.path.join(args.build, "src", "sim", "libmspti.so"),
               MSMONITOR_LOG_PATH=os.path.join(tmp, "log"), MSMONITOR_SHM_DIR=os.path.join(tmp, "shm"),
               MSMONITOR_JOB_KEY=key, RANK="0", PYTHONDONTWRITEBYTECODE="1")
    if daemon is not None:
        env.update(MSMONITOR_SOCKET_DIR=daemon.sockdir, HOME=daemon.sockdir, KINETO_IPC_SOCKET_DIR=daemon.sockdir,
                   BENCH_DYNO=json.dumps(daemon.dyno))
    if mode != "plain":
        env["MSMONITOR_USE_DAEMON"] = "1"
        if hook != "loop":
            env["MSMONITOR_STEP_HOOK"] = hook
    return env


class Runner:
    """The parent's end of one child."""

    def __init__(self, args, tmp, daemon, mode, hook, k):
        self.mode = mode
        self.err = os.path.join(tmp, f"{mode}-{hook}-{k}.err")
        argv = [PYTHON, os.path.abspath(__file__), "--child", mode, "--hooks", hook, "--warmup", str(args.warmup)]
        env = child_env(args, tmp, daemon, "idle" if mode == PYHOOKS else mode, hook, f"bench-{mode}-{hook}-{k}")
        with open(self.err, "wb") as f:
            self.p = subprocess.Popen(argv, env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=f, text=True,
                                      start_new_session=True)

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            with open(self.err, encoding="utf-8", errors="replace") as f:
                raise SystemExit(f"the {self.mode} child exited ({self.p.returncode}):\n{f.read()[-4000:]}")
        return json.loads(line)

    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.read()

    def finish(self):
        """quit; libmsmonitor must have counted every step of the loop (steps stay exact)."""
        res = self.ask("quit")
        self.p.wait(60)
        want = res["loop_steps"] - res.get("off_steps", 0) + 1
        if self.mode != "plain" and res.get("lib_step") != want:
            raise SystemExit(f"{self.mode}: libmsmonitor is at step {res.get('lib_step')} after "
                             f"{res['loop_steps']} loop steps, {res.get('off_steps', 0)} of them with the hook "
                             f"taken out (expected {want})")
        return res

    def pairs(self, n, norec=False):
        """The paired steps; libmsmonitor must have stepped exactly once per ON step (our code
        ran each time) and so never in an OFF one. norec: the simulator records no marker
        meanwhile; it must have suppressed both marker calls (the range end and start) of every
        ON step."""
        got = self.ask(f"pairs {n}" + (" norec" if norec else ""))
        if norec and got.get("suppressed") != 2 * n:
            raise SystemExit(f"{self.mode}: the simulator suppressed {got.get('suppressed')} marker calls while "
                             f"its markers were off (expected {2 * n}: two per step with the work on)")
        if self.mode != "plain" and got.get("lib_steps") != n:
            raise SystemExit(f"{self.mode}: {n} pairs of steps stepped libmsmonitor {got.get('lib_steps')} times "
                             f"(expected {n}: once per ON step, never in an OFF one)")
        return got

    def kill(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


def _t(args, what):
    if args.smoke:
        print(f"  [{time.monotonic() - T0:6.1f} s] {what}", flush=True)


T0 = time.monotonic()


def measure(args, tmp, daemons, hook):
    """Sets of three fresh children (one per mode), each set running its share of the rounds:
    one block of steps per mode and round, back to back, the order rotating. A process has its
    own speed (where its memory landed, which core): with several sets that averages out.
    After its rounds each child of a set runs the paired steps (msmonitor's per-step work on
    and off in the same process), the order of the children rotating from set to set.
    With torch, a fourth child per set (PYHOOKS: idle on the previous version's per-step path:
    the Python step() as the hook's callback, and the Python optimizer wrapper) runs only the
    paired steps.
    Returns per mode the blocks' results, per mode a list of the processes' paired results,
    and the breakdown of the last session child."""
    res = {m: [] for m in MODES}
    pairs = {m: [] for m in MODES + (NOREC, PYHOOKS)}
    paired = MODES + ((PYHOOKS,) if hook != "loop" else ())
    parts = None
    per_set = -(-args.rounds // args.sets)
    done = 0
    for k in range(args.sets):
        runners = {}
        try:
            for mode in paired:  # one at a time: each sets up alone
                runners[mode] = Runner(args, tmp, daemons.get("idle" if mode == PYHOOKS else mode), mode, hook, k)
                runners[mode].read()   # ready
                _t(args, f"{hook}/{mode} ready (set {k + 1})")
            for _ in range(min(per_set, args.rounds - done)):
                r = done
                done += 1
                for mode in MODES[r % 3:] + MODES[:r % 3]:
                    res[mode].append(runners[mode].ask(f"run {args.steps}"))
            r = k % len(paired)
            seq = [(m, False) for m in paired[r:] + paired[:r]]
            seq.insert(seq.index(("session", False)) + k % 2, ("session", True))
            for mode, norec in seq:
                pairs[NOREC if norec else mode].append(runners[mode].pairs(args.pairs, norec))
            if k == args.sets - 1 and hook != "loop":
                parts = runners["session"].ask(f"parts {200 if args.smoke else 20000}")
            _t(args, f"{hook}: set {k + 1} done")
            for mode in paired:
                runners[mode].finish()
        finally:
            for run in runners.values():
                run.kill()
    return res, pairs, parts


def c_parts(args, tmp, daemon):
    exe = os.path.join(args.build, "bench", "stepcost", "bench_step_parts")
    env = child_env(args, tmp, daemon, "session", "loop", "bench-parts")
    r = subprocess.run([exe, str(2000 if args.smoke else 200000)], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"bench_step_parts failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--steps", type=int, default=200, help="steps per block (one block per mode and round)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--sets", type=int, default=4, help="fresh processes for every rounds/sets rounds")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--pairs", type=int, default=2000,
                    help="pairs of steps (one on, one off, the order alternating) per process of the paired measurement")
    ap.add_argument("--hooks", default="optimizer,forward")
    ap.add_argument("--no-torch", action="store_true", help="the simulator's loop even when torch is importable")
    ap.add_argument("--smoke", action="store_true", help="a short run (2 rounds of 20 steps): the suite's check")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions per step under callgrind (slow: minutes per hook)")
    ap.add_argument("--cg-steps", type=int, default=100, help="steps per region under callgrind")
    ap.add_argument("--child", choices=MODES + (PYHOOKS,))
    ap.add_argument("--child-cg")
    args = ap.parse_args()
    if args.child:
        return child_main(args.child, args.hooks, args.warmup)
    if args.child_cg:
        return cg_child(args.child_cg, args.steps)
    args.build = os.path.abspath(args.build)
    if args.smoke:
        args.steps, args.warmup, args.rounds, args.sets = 20, 20, 2, 1
        args.pairs = 20
    if args.pairs < 2:
        ap.error(f"--pairs {args.pairs}: need at least 2")
    hooks = ["loop"] if args.no_torch or not torch_importable() else [h for h in args.hooks.split(",") if h]
    tmp = tempfile.mkdtemp(prefix="mmstepcost")
    for d in ("log", "shm"):
        os.mkdir(os.path.join(tmp, d), 0o700)
    daemons = {}
    try:
        # one daemon per dyno mode: `dyno npu-monitor` reaches every process of its daemon
        daemons = {"idle": Daemon(args.build, tmp, "idle"), "session": Daemon(args.build, tmp, "session")}
        loop = "the simulator's training loop (no torch)" if hooks == ["loop"] else \
            "PyTorch MLP 64 wide, batch 32, CPU, 1 thread"
        print(f"step cost: {loop}; session = dyno {' '.join(SESSION_ARGS[:4])} (step markers only)", flush=True)
        parts, results = {}, {}
        for hook in hooks:
            res, pairs, parts[hook] = measure(args, tmp, daemons, hook)
            results[hook] = (res, pairs)
            _t(args, f"{hook}: measured")
        c_out = c_parts(args, tmp, daemons["session"])
        markers = markers_records(c_out)
        print_paired_intro(args, hooks)
        for hook in hooks:
            print_paired(hook, results[hook][1], markers)
        print(f"second figure, across processes: the same loop in three processes side by side "
              f"(plain / idle / session), {args.rounds} interleaved rounds of {args.steps} steps per mode in "
              f"{args.sets} sets; a process has a speed of its own (on this kind of shared VM tens of us per "
              "step), which the paired figure above does not see", flush=True)
        for hook in hooks:
            res = results[hook][0]
            print_table(hook, res)
            per_set = -(-args.rounds // args.sets)
            if args.sets > 1:
                print("  median step diff to plain by set of processes (idle / session): " + ", ".join(
                    "{:+.1f} / {:+.1f} us".format(*(statistics.median(
                        a["wall_ns"] - b["wall_ns"] for a, b in zip(res[m][i:i + per_set], res["plain"][i:i + per_set]))
                        / 1e3 for m in ("idle", "session"))) for i in range(0, args.rounds, per_set)), flush=True)
        for hook, p in parts.items():
            if p is None:
                continue
            print(f"where one step's time goes in our code, {hook} hook, session (ns per call, each layer timed "
                  "alone, the empty call's cost taken out):")
            for k, v in p.items():
                print(f"  {k:<52} {v:8.0f}")
        print(c_out, end="")
        if args.instructions and hooks != ["loop"]:
            for hook in hooks:
                print_cg(hook, cg_measure(args, tmp, daemons["idle"], hook))
    finally:
        for d in daemons.values():
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


WHAT = {"optimizer": "optimizer hook (torch.optim step)", "forward": "forward hook (inference forward)",
        "loop": "step() called by the loop"}


def markers_records(c_out):
    """ns per step of the step markers' own records, from bench_step_parts: its markers part
    with the session less the same part idle (the same calls, the simulator recording
    nothing). Two figures: spaced as a loop's steps (what a loop pays: each step's device
    record wakes the simulator's device thread, asleep since the last step) and in a tight
    loop (that thread never sleeps)."""
    got, which = {}, None
    for line in c_out.splitlines():
        if line.startswith("C step parts, "):
            which = "session" if "session" in line else "idle"
        elif which and line.strip().startswith("markers "):
            got[(which, "tight")] = float(line.split()[-1])
        elif which and line.strip().startswith("spaced as steps: markers"):
            got[(which, "spaced")] = float(line.split()[-1])
    if len(got) != 4:
        return None
    return {k: got[("session", k)] - got[("idle", k)] for k in ("spaced", "tight")}


def print_paired_intro(args, hooks):
    on = ("dynamic_profile.step() called by the loop" if hooks == ["loop"] else
          "the hook init() installed, which calls dynamic_profile.step()'s C whole")
    off = "not called" if hooks == ["loop"] else "the hook taken out"
    print(f"""headline: msmonitor's per-step work ON - OFF in the same process
  {args.pairs} pairs of consecutive steps per process, one ON ({on}) and one OFF ({off}: the bare loop,
  none of our code), the order alternating (ABBA), in each of {args.sets} sets; libmsmonitor stepped exactly
  once per ON step and never in an OFF one. Per process: the OFF steps' median (the bare loop in the same
  run) and 10th percentile, the median over the pairs of ON - OFF, their mean without the 10 % at
  either end, and the median ON - OFF of the thread's CPU time; the columns are medians over the
  processes. plain: both halves bare (the method's own noise). session: its background threads (the
  record path, timed by bench_plugin_e2e) run in ON and OFF steps alike; ON includes the step
  markers' records (each step's device record wakes the simulator's device thread). Its second
  sequence has the simulator record no marker (its default domain disabled; it must have suppressed
  both marker calls of every ON step): our step markers' calls still run, and ON - OFF
  (session-norec) is the session's step beyond the markers' own records.""", flush=True)


def print_paired(hook, pairs, markers_ns):
    """pairs[mode]: one paired result per process."""
    print(f"{WHAT[hook]}, paired in one process:")
    print(f"  {'process':<13} {'bare step':>10} {'ON-OFF':>9} {'% step':>8}   {'p10 bare':>9} {'trimmed':>9}   "
          f"{'CPU ON-OFF':>10}  pairs")
    diffs = {}
    for mode in MODES + (NOREC, PYHOOKS):
        got = pairs[mode]
        if not got:
            continue
        bare = statistics.median(r["off_ns"] for r in got)
        d = statistics.median(r["d_ns"] for r in got) / 1e3
        diffs[mode] = d
        line = (f"  {'session-norec' if mode == NOREC else mode:<13} {bare / 1e3:8.1f}us {d:+7.2f}us "
                f"{d * 1e5 / bare if bare else 0:+7.2f}%   {statistics.median(r['off_p10_ns'] for r in got) / 1e3:7.1f}us "
                f"{statistics.median(r['d_tmean_ns'] for r in got) / 1e3:+7.2f}us   "
                f"{statistics.median(r['dcpu_ns'] for r in got) / 1e3:+8.2f}us  {sum(r['pairs'] for r in got)}")
        print(line + {"plain": "  (A/A: both halves bare)", "session": "  (ON: the step markers record)",
                      NOREC: "  (ON: the markers record nothing)",
                      PYHOOKS: "  (idle, the previous version: Python step(); optimizer: Python wrapper)"}.get(mode, ""))
    if len(pairs["idle"]) > 1:
        shown = [m for m in MODES + (NOREC, PYHOOKS) if pairs[m]]
        print("  median ON - OFF by process (" + " / ".join("session-norec" if m == NOREC else m for m in shown) +
              "): " + ", ".join(" / ".join(f"{pairs[m][i]['d_ns'] / 1e3:+.2f}" for m in shown) + " us"
                                for i in range(len(pairs["idle"]))))
    line = f"  the step markers' own records (session less session-norec): {diffs['session'] - diffs[NOREC]:+.2f} us"
    if markers_ns is not None:
        line += (f"; bench_step_parts' markers, session less idle: {markers_ns['spaced'] / 1e3:.2f} us "
                 f"spaced as steps, {markers_ns['tight'] / 1e3:.2f} us in a tight loop")
    print(line, flush=True)


def print_table(hook, res):
    """Medians over the rounds; the differences are the medians of the same-round differences
    to plain (paired: a round's blocks ran back to back under the same load). Besides the
    median step: the 10th percentile (the steps nothing else interrupted: steadier on a loaded
    machine) and the training thread's CPU time per step."""
    print(f"{WHAT[hook]}, across processes:")
    print(f"  {'mode':<8} {'median step':>11} {'diff':>9} {'diff %':>8}   {'p10 step':>9} {'diff':>9} "
          f"{'diff %':>8}   {'CPU/step':>9} {'diff':>9} {'diff %':>8}")
    for mode in MODES:
        line = f"  {mode:<8}"
        for key, width in (("wall_ns", 9), ("p10_ns", 7), ("cpu_ns", 7)):
            base = statistics.median(x[key] for x in res["plain"])
            v = statistics.median(x[key] for x in res[mode])
            d = statistics.median(a[key] - b[key] for a, b in zip(res[mode], res["plain"])) / 1e3
            line += f" {v / 1e3:{width}.1f}us {d:+7.1f}us {d * 1e5 / base if base else 0:+7.2f}%  "
        print(line.rstrip(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
