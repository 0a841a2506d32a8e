"""msmonitor.step_hook against fake torch-like modules shaped like PyTorch 1.13 (no global hook
API; __init__ wraps the class `step` for the profiler) and 2.x (the wrapper also runs the global
post hooks), then against the real torch when it is installed. Each test loads a fresh copy of
the module: its state is per process."""
import functools
import importlib.util
import itertools
import os
import sys
import types

import pytest

from conftest import SOURCE

_seq = itertools.count()


def load_step_hook(impl=None):
    """A fresh copy; impl "c": its optimizer and forward hooks are IPCMonitor_C's (the build
    tree's extension loaded), "python": the Python ones."""
    path = os.path.join(SOURCE, "python", "msmonitor", "step_hook.py")
    spec = importlib.util.spec_from_file_location(f"step_hook_under_test_{next(_seq)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if impl == "c":
        _load_ext()
    if impl is not None:
        mod._USE_C = impl == "c"
    return mod


@pytest.fixture(params=["c", "python"])
def impl(request):
    """The optimizer hook's implementation under test: C (what init() installs) or Python."""
    return request.param


def fake_torch(v2):
    """A torch-like module: optim.Optimizer patches its class's step on construction the way
    torch does (1.13 `_hook_for_profile`, 2.x `_patch_step_function`); with v2 the wrapper
    runs global post hooks registered through optim.optimizer."""
    torch = types.ModuleType(f"faketorch{next(_seq)}")
    optim = types.ModuleType(torch.__name__ + ".optim")
    torch.optim = optim
    post_hooks = []

    class Optimizer:
        def __init__(self, params=None):
            self.params = params
            self.steps = 0
            if not getattr(type(self).step, "hooked", False):
                type(self).step = self._profile_hook_step(type(self).step)
                type(self).step.hooked = True

        @staticmethod
        def _profile_hook_step(func):
            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                self, *_ = args
                out = func(*args, **kwargs)
                if v2:
                    for hook in list(post_hooks):
                        hook(self, args, kwargs)
                return out
            return wrapper

        def step(self, closure=None):
            raise NotImplementedError

    class SGD(Optimizer):
        def step(self, closure=None):
            self.steps += 1
            if closure == "raise":
                raise RuntimeError("boom")

    class Adam(SGD):
        pass

    class _LRScheduler:
        """Like 1.13's: replaces optimizer.step by a counting instance attribute bound to the
        class function as it is now."""

        def __init__(self, optimizer):
            self.optimizer = optimizer
            func = type(optimizer).step

            @functools.wraps(func)
            def with_counter(*args, **kwargs):
                optimizer.counted = getattr(optimizer, "counted", 0) + 1
                return func(optimizer, *args, **kwargs)

            with_counter._with_counter = True
            optimizer.step = with_counter

        def step(self):
            pass

    class StepLR(_LRScheduler):
        pass

    lrs = types.ModuleType(optim.__name__ + ".lr_scheduler")
    lrs._LRScheduler, lrs.StepLR = _LRScheduler, StepLR
    optim.Optimizer, optim.SGD, optim.Adam, optim.lr_scheduler = Optimizer, SGD, Adam, lrs
    if v2:
        optmod = types.ModuleType(optim.__name__ + ".optimizer")
        optmod.register_optimizer_step_post_hook = post_hooks.append
        optim.optimizer = optmod
    return torch


class Counter:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv("MSMONITOR_NO_OPTIMIZER_HOOK", raising=False)
    monkeypatch.delenv("MSMONITOR_LOG_LEVEL", raising=False)


@pytest.mark.parametrize("v2,expect", [(True, "post_hook"), (False, "wrap")])
def test_counts_every_step_of_one_optimizer(v2, expect, impl):
    sh, torch, c = load_step_hook(impl), fake_torch(v2), Counter()
    assert sh.install(c, torch_module=torch) is True
    assert sh.mode() == expect
    opt = torch.optim.SGD()
    for _ in range(7):
        opt.step()
    assert opt.steps == 7 and c.n == 7
    if not v2:                                       # the class's step is our wrapper, C or Python
        ours = torch.optim.SGD.__dict__["step"].__wrapped__
        assert sh._is_wrapper(ours)
        assert (type(ours).__name__ == "Wrap") == (impl == "c")
        assert ours.__name__ == "step" and ours.__wrapped__.__qualname__.endswith("SGD.step")


@pytest.mark.parametrize("v2", [True, False])
def test_optimizer_constructed_before_install(v2, impl):
    sh, torch, c = load_step_hook(impl), fake_torch(v2), Counter()
    early = torch.optim.Adam()
    early.step()                                     # torch already patched its class
    sh.install(c, torch_module=torch)
    for _ in range(4):
        early.step()
    assert c.n == 4


def test_wrap_covers_classes_defined_after_install_and_late_step(impl):
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()
    sh.install(c, torch_module=torch)

    class Lion(torch.optim.Optimizer):               # __init_subclass__
        def step(self, closure=None):
            self.steps += 1

    class Late(torch.optim.Optimizer):
        pass

    Late.step = lambda self, closure=None: None      # assigned after the class statement
    for cls in (Lion, Late):
        before = c.n
        o = cls()
        o.step()
        o.step()
        assert c.n - before == 2, cls


@pytest.mark.parametrize("v2", [True, False])
def test_subclass_calling_super_step_counts_once(v2, impl):
    sh, torch, c = load_step_hook(impl), fake_torch(v2), Counter()
    sh.install(c, torch_module=torch)

    class Clipped(torch.optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    torch.optim.SGD()                                # its class gets patched too
    o = Clipped()                                    # the primary
    for _ in range(5):
        o.step()
    assert o.steps == 5 and c.n == 5


@pytest.mark.parametrize("v2", [True, False])
def test_two_optimizers_count_once_per_iteration(v2, impl):
    sh, torch, c = load_step_hook(impl), fake_torch(v2), Counter()
    sh.install(c, torch_module=torch)
    gen, disc = torch.optim.Adam(), torch.optim.SGD()
    for _ in range(3):
        disc.step()
        gen.step()
    assert c.n == 3


def test_two_threads_inside_one_step_count_twice(impl):
    """The nesting is per thread: a step of the primary on a second thread while the first
    thread's step of it runs is a step of its own (each counts once, super() included)."""
    import threading
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()
    sh.install(c, torch_module=torch)
    barrier = threading.Barrier(2)

    class Synced(torch.optim.SGD):
        def step(self, closure=None):
            barrier.wait(timeout=30)                 # both threads are inside step() here
            return super().step(closure)

    o = Synced()
    t = threading.Thread(target=o.step)
    t.start()
    o.step()
    t.join(30)
    assert not t.is_alive() and o.steps == 2 and c.n == 2


def test_nested_optimizer_inner_primary_counted(impl):
    """A wrapper optimizer that builds its inner one last and steps it from its own step."""
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()
    sh.install(c, torch_module=torch)

    class Lookahead(torch.optim.Optimizer):
        def __init__(self):
            super().__init__()
            self.inner = torch.optim.SGD()

        def step(self, closure=None):
            self.inner.step(closure)

    la = Lookahead()
    for _ in range(3):
        la.step()
    assert c.n == 3


def test_scheduler_built_before_install_counts_from_its_first_step(impl):
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()
    o = torch.optim.SGD()
    sched = torch.optim.lr_scheduler.StepLR(o)
    sh.install(c, torch_module=torch)
    o.step()                                         # the instance attribute: not seen yet
    sched.step()                                     # hands o.step to the hook
    for _ in range(3):
        o.step()
        sched.step()
    assert c.n == 3 and o.counted == 4 and o.steps == 4
    assert o.step._with_counter is True              # torch's mark kept


def test_scheduler_built_after_install_not_wrapped_twice(impl):
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()
    sh.install(c, torch_module=torch)
    o = torch.optim.SGD()
    sched = torch.optim.lr_scheduler.StepLR(o)
    for _ in range(3):
        o.step()
        sched.step()
    assert c.n == 3 and o.counted == 3


def test_raising_step_not_counted_and_does_not_stick(impl):
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()
    sh.install(c, torch_module=torch)
    o = torch.optim.SGD()
    with pytest.raises(RuntimeError):
        o.step("raise")
    o.step()
    assert c.n == 1


@pytest.mark.parametrize("v2", [True, False])
def test_install_is_idempotent(v2, impl):
    sh, torch, c1, c2 = load_step_hook(impl), fake_torch(v2), Counter(), Counter()
    assert sh.install(c1, torch_module=torch)
    o = torch.optim.SGD()
    assert sh.install(c2, torch_module=torch)        # replaces the callback, hooks nothing twice
    assert sh.install(c2, torch_module=torch)
    o.step()
    o.step()
    assert (c1.n, c2.n) == (0, 2)


def test_failing_callback_never_breaks_step(capsys, impl):
    sh, torch = load_step_hook(impl), fake_torch(False)

    def bad():
        raise ValueError("nope")

    sh.install(bad, torch_module=torch)
    o = torch.optim.SGD()
    o.step()
    o.step()
    assert o.steps == 2
    assert capsys.readouterr().err.count("step hook callback failed: nope") == 1


def test_one_warning_when_no_hook_possible(capsys, impl):
    sh, c = load_step_hook(impl), Counter()
    broken = types.ModuleType("brokentorch")         # torch importable, no torch.optim.Optimizer
    assert sh.install(c, torch_module=broken) is False
    assert sh.install(c, torch_module=broken) is False
    err = capsys.readouterr().err
    assert err.count("[WARNING]") == 1, err
    assert "optimizer step hook not installed (torch.optim.Optimizer not found)" in err
    assert "dynamic_profile.step()" in err
    assert sh.mode() is None


def test_one_warning_when_patching_fails(capsys, impl):
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()

    class Frozen(type):
        def __setattr__(cls, name, value):
            raise TypeError(f"cannot set {name}")

    torch.optim.Optimizer = Frozen("Optimizer", (), {"step": lambda self: None})
    assert sh.install(c, torch_module=torch) is False
    err = capsys.readouterr().err
    assert err.count("[WARNING]") == 1 and "cannot set" in err, err


def test_torch_missing_is_debug_only(monkeypatch, capsys, impl):
    monkeypatch.setitem(sys.modules, "torch", None)  # find_spec("torch") -> None
    sh = load_step_hook(impl)
    assert sh.install(Counter()) is False
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("MSMONITOR_LOG_LEVEL", "DEBUG")
    assert sh.install(Counter()) is False
    assert "[DEBUG]" in capsys.readouterr().err


def test_env_turns_it_off(monkeypatch, impl):
    monkeypatch.setenv("MSMONITOR_NO_OPTIMIZER_HOOK", "1")
    sh, torch, c = load_step_hook(impl), fake_torch(True), Counter()
    assert sh.install(c, torch_module=torch) is False
    torch.optim.SGD().step()
    assert c.n == 0


def test_real_torch(impl):
    """Whatever torch is installed (Debian 12: 1.13.1, the wrap path): an optimizer and its LR
    scheduler built before install(), one built after with a scheduler, a super().step()
    subclass. In a fresh interpreter each: the hook patches torch's classes for the process."""
    pytest.importorskip("torch", reason="torch not importable (Debian: python3-torch)")
    import subprocess
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "real_torch", impl], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def _real_torch(impl):
    import torch
    sh, c = load_step_hook(impl), Counter()
    model = torch.nn.Linear(4, 1)

    def train(opt, n, sched=None):
        for _ in range(n):
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            if sched is not None:
                sched.step()

    early = torch.optim.SGD(model.parameters(), lr=0.01)
    early_sched = torch.optim.lr_scheduler.StepLR(early, 2)
    assert sh.install(c) is True
    v2 = int(torch.__version__.split(".")[0]) >= 2
    assert sh.mode() == ("post_hook" if v2 else "wrap")
    train(early, 6, early_sched)
    assert c.n == (6 if v2 else 5)                   # < 2.0: from the first scheduler step on
    assert early._step_count == 6 and early_sched.last_epoch == 6   # torch still counts
    c.n = 5                                          # one baseline on every torch
    adam = torch.optim.Adam(model.parameters(), lr=0.01)
    train(adam, 5, torch.optim.lr_scheduler.StepLR(adam, 2))
    assert c.n == 10

    class Clipped(torch.optim.SGD):
        def step(self, closure=None):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            return super().step(closure)

    clipped = Clipped(model.parameters(), lr=0.01)
    train(clipped, 5)
    assert c.n == 15
    assert sh.install(c) is True                     # idempotent on the real thing too
    train(adam, 2)
    assert c.n == 15                                 # adam is no longer the primary
    del clipped                                      # ... until the primary is gone
    train(adam, 2)
    assert c.n == 17
    if impl == "c":
        assert type(sh._state["c"]).__name__ == "Hook" and sh._state["c"].primary() is adam
    print("ok")


def test_shipped_in_both_build_tree_packages():
    from python_util import PKG, require_packages
    require_packages()
    for pkg in ("msmonitor", "IPCMonitor"):
        assert os.path.exists(os.path.join(PKG, pkg, "step_hook.py")), pkg


def test_half_installed_hook_stays_inert(capsys, impl):
    """A class that refuses patching after others were patched: the WARNING says to call
    step() by hand, so the wrappers already in place must not count as well."""
    sh, torch, c = load_step_hook(impl), fake_torch(False), Counter()

    class Frozen(type):
        def __setattr__(cls, name, value):
            raise TypeError(f"cannot set {name}")

    class Stubborn(torch.optim.SGD, metaclass=Frozen):
        def step(self, closure=None):
            return super().step(closure)

    assert sh.install(c, torch_module=torch) is False
    o = torch.optim.SGD()
    o.step()
    assert o.steps == 1 and c.n == 0
    assert "cannot set step" in capsys.readouterr().err


def _fake_vllm(tmp_path, version):
    pkg = tmp_path / f"v{version.replace('.', '_')}" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f'__version__ = "{version}"\n')
    return str(pkg.parent)


def test_step_source_env_and_vllm(monkeypatch, tmp_path, capsys):
    """MSMONITOR_STEP_HOOK chooses; unset, an importable vLLM >= 0.11 means the forward hook,
    an older one (or none) the optimizer hook; an invalid value warns and is ignored."""
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.delenv("MSMONITOR_STEP_HOOK", raising=False)
    sh = load_step_hook()
    if importlib.util.find_spec("vllm") is None:
        assert sh.step_source() == "optimizer"
    for value in ("optimizer", "forward", "none", " Forward "):
        monkeypatch.setenv("MSMONITOR_STEP_HOOK", value)
        assert sh.step_source() == value.strip().lower()
    monkeypatch.setenv("MSMONITOR_STEP_HOOK", "sometimes")
    monkeypatch.syspath_prepend(_fake_vllm(tmp_path, "0.10.2"))
    assert sh.step_source() == "optimizer"
    assert "MSMONITOR_STEP_HOOK='sometimes' is not one of" in capsys.readouterr().err
    monkeypatch.delenv("MSMONITOR_STEP_HOOK")
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.syspath_prepend(_fake_vllm(tmp_path, "0.11.1rc1"))
    assert sh.vllm_version() == (0, 11)
    assert sh.step_source() == "forward"
    assert "vLLM 0.11 found" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "vllm", raising=False)


def test_forward_hook_counts_outermost_forward_once():
    """On the real torch: nested module forwards count once per outer call, a forward that
    raised does not block later steps, and one module is hooked once."""
    torch = pytest.importorskip("torch")
    sh = load_step_hook()
    calls = []

    class Fails(torch.nn.Module):
        """Raises inside the forward when asked: a Python exception, since a C++ one thrown by
        libtorch (a shape error) aborts the interpreter that the ASan tree preloads its runtime
        into (libtorch is not built with ASan), whatever our hook does."""

        def __init__(self):
            super().__init__()
            self.fail = False

        def forward(self, x):
            if self.fail:
                raise RuntimeError("forward failed")
            return x

    fails = Fails()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2), fails)
    assert sh.install_forward(model, lambda: calls.append(1))
    assert sh.install_forward(model, lambda: calls.append(1))      # not hooked twice
    assert sh.forward_installed()
    x = torch.randn(3, 4)
    for _ in range(5):
        model(x)
    assert len(calls) == 5
    fails.fail = True
    with pytest.raises(RuntimeError):
        model(x)                                                    # raised inside the forward
    fails.fail = False
    model(x)
    assert len(calls) == 6


def _load_ext():
    """IPCMonitor_C from the build tree (its fwdhook submodule serves the module-wide hook)."""
    from conftest import BUILD
    lib64 = os.path.join(BUILD, "python", "pkg", "msmonitor", "lib64")
    if not os.path.exists(os.path.join(lib64, "IPCMonitor_C.so")):
        pytest.skip("IPCMonitor_C not built")
    if lib64 not in sys.path:
        sys.path.append(lib64)
    import IPCMonitor_C  # noqa: F401


@pytest.mark.parametrize("impl", ["c", "python"])
def test_module_wide_forward_hook_costs_two_hook_calls_per_step(impl):
    """On the real torch, the module-wide hook (install_forward(None), what init() installs for
    MSMONITOR_STEP_HOOK=forward): one step per outermost forward of any module; torch's global
    table holds our hook only between forwards, so nested modules run hook-free; the root's
    own hook tables are as they were between steps (a pickled model names nothing of ours);
    a forward that raised is recovered by the next call of the same module, while another
    top-level module does not count meanwhile (the rule of the per-thread depth before); an
    outermost call from a second thread while one runs counts too."""
    torch = pytest.importorskip("torch")
    import pickle
    import threading
    import torch.nn.modules.module as mm

    if impl == "c":
        _load_ext()
    sh = load_step_hook()
    sh._USE_C = impl == "c"
    calls = []
    seen = {}

    def ours_in_table():
        glob = sh._fwdhook_c().glob_pre if impl == "c" else sh._glob_pre
        return any(h is glob for h in mm._global_forward_pre_hooks.values())

    class Probe(torch.nn.Module):
        """Records, inside the forward, whether torch's global table and the root's tables
        hold anything of ours; raises or waits when asked."""

        def __init__(self):
            super().__init__()
            self.fail = False
            self.barrier = None

        def forward(self, x):
            seen["global"] = ours_in_table()
            if self.fail:
                raise RuntimeError("forward failed")
            if self.barrier is not None:
                self.barrier.wait(timeout=30)
            return x

    probe = Probe()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), probe)
    other = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    try:
        assert sh.install_forward(None, lambda: calls.append(1))
        assert sh.forward_installed()
        assert (sh._fwd.get("c") is not None) == (impl == "c")
        assert ours_in_table()
        for _ in range(4):
            model(x)
        assert len(calls) == 4                                     # nested modules count once
        assert seen["global"] is False                             # not in the table inside a forward
        assert ours_in_table()
        assert not model._forward_hooks and not model._forward_pre_hooks
        other(x)                                                    # another root counts too
        assert len(calls) == 5
        assert b"step_hook" not in pickle.dumps(other)              # nothing of ours in a root's tables
        probe.fail = True
        with pytest.raises(RuntimeError):
            model(x)                                                # raised: not a step
        assert len(calls) == 5
        other(x)                                                    # inside the stuck forward: no step
        assert len(calls) == 5
        probe.fail = False
        model(x)                                                    # the same root again: recovered
        assert len(calls) == 6
        other(x)
        assert len(calls) == 7
        assert not model._forward_hooks and not model._forward_pre_hooks and not other._forward_hooks
        # two threads inside the same root at once: two steps
        probe.barrier = threading.Barrier(2)
        t = threading.Thread(target=model, args=(x,))
        t.start()
        model(x)
        t.join(30)
        probe.barrier = None
        assert len(calls) == 9
        assert not model._forward_hooks and not model._forward_pre_hooks
        assert ours_in_table()
    finally:
        sh._forward_uninstall()
    assert not ours_in_table()
    model(x)
    assert len(calls) == 9


@pytest.mark.parametrize("impl", ["c", "python"])
def test_module_wide_forward_hook_failing_callback(impl, capsys):
    """A step callback that raises never breaks forward(): one WARNING, later steps still call
    it (and a new install_forward() callback takes over)."""
    torch = pytest.importorskip("torch")
    if impl == "c":
        _load_ext()
    sh = load_step_hook()
    sh._USE_C = impl == "c"
    tries, calls = [], []

    def boom():
        tries.append(1)
        raise ValueError("no daemon today")

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    x = torch.randn(2, 3)
    try:
        assert sh.install_forward(None, boom)
        for _ in range(3):
            assert model(x).shape == (2, 3)
        assert len(tries) == 3
        err = capsys.readouterr().err
        assert err.count("forward hook callback failed: no daemon today") == 1, err
        assert sh.install_forward(None, lambda: calls.append(1))     # replaces the callback
        model(x)
        assert len(tries) == 3 and len(calls) == 1
    finally:
        sh._forward_uninstall()


if __name__ == "__main__" and sys.argv[1:2] == ["real_torch"]:
    _real_torch(sys.argv[2])


def test_tick_runs_the_window_only_when_needed_and_stops_after_a_failure():
    """IPCMonitor_C.dynamic.tick, the hooks' callback in dyno mode: libmsmonitor's step (a no-op
    outside dyno mode, as here), then window.after_step() only while the window says busy; an
    exception from the window goes to on_error once and the ticks stop until the next
    set_step_window()."""
    _load_ext()
    import IPCMonitor_C
    dyn = IPCMonitor_C.dynamic

    class Window:
        def __init__(self):
            self.busy, self.calls, self.fail = False, 0, None

        def after_step(self):
            self.calls += 1
            if self.fail:
                raise self.fail

    errors = []
    w = Window()
    try:
        dyn.set_step_window(w, errors.append)
        for _ in range(3):
            assert dyn.tick() is None
        assert w.calls == 0                                        # not busy, not moved: untouched
        w.busy = True
        dyn.tick()
        dyn.tick()
        assert w.calls == 2
        w.fail = ValueError("analysis broke")
        dyn.tick()
        dyn.tick()
        assert w.calls == 3 and [str(e) for e in errors] == ["analysis broke"]
        dyn.set_step_window(w, errors.append)                     # re-armed
        w.fail = None
        dyn.tick()
        assert w.calls == 4 and len(errors) == 1
        with pytest.raises(TypeError):
            dyn.set_step_window(w, "not callable")
    finally:
        dyn.set_step_window(None, errors.append)
    dyn.tick()
    assert w.calls == 4
