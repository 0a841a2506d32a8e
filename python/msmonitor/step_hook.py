"""msmonitor.step_hook: run a function after every step of the training loop's optimizer, on
every PyTorch we support, so a loop that only calls `dynamic_profile.init()` and
`optimizer.step()` is monitored (docs/design/ipc.md#shared-memory-handoff). No torch import happens unless torch is
installed; nothing here may ever break the training script.

Two strategies, chosen once per process:
- "post_hook" (PyTorch >= 2.0): torch.optim.optimizer.register_optimizer_step_post_hook.
- "wrap" (older PyTorch, e.g. Debian's 1.13.1): `step` is wrapped on the Optimizer classes
  themselves: every subclass already defined (walked through __subclasses__(), so optimizers
  constructed before install() are covered, no gc scan), later ones through
  __init_subclass__, and the class of every optimizer constructed later (a `step` assigned
  after the class statement). An LR scheduler built before install() has replaced its
  optimizer's `step` by an instance attribute; the schedulers' `step` hands it to us.
Only one optimizer counts (the primary: the last one constructed after install(), else the
first one that steps), so a GAN's two optimizers give one call per iteration; a subclass
whose `step` calls super().step() counts once (a per-thread, per-optimizer nesting depth).
With the IPCMonitor_C extension loaded the wrapper, the nesting and the primary are C
(IPCMonitor_C.optstep); the Python versions below serve without it."""
import functools
import importlib.util
import os
import sys
import threading
import types
import weakref

_LEVELS = {"DEBUG": 0, "INFO": 1, "WARNING": 2, "ERROR": 3}
_MARK = "_msmonitor_step_hook"   # set on our wrappers; functools.wraps carries it outward

_lock = threading.Lock()
_tls = threading.local()
_state = {
    "mode": None,        # "post_hook" | "wrap" once installed
    "failed": False,     # the one WARNING was given; never retried
    "callback": None,    # step_fn of the latest install()
    "primary": None,     # weakref.ref to the optimizer that counts
    "cb_warned": False,
    "opt_cls": None,     # torch.optim.Optimizer on the wrap path
    "c": None,           # IPCMonitor_C.optstep.Hook when the extension is loaded at install()
}


def _log(level, msg):
    # Read per call, not cached: install() runs once per init(), so the cost does not matter.
    threshold = _LEVELS.get(os.environ.get("MSMONITOR_LOG_LEVEL", "INFO").strip().upper(), 1)
    if _LEVELS[level] >= threshold:
        print(f"[{level}] [msmonitor.step_hook {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def mode():
    """The strategy in use ("post_hook", "wrap") or None when no hook is installed."""
    return _state["mode"]


def install(step_fn, torch_module=None):
    """Call step_fn() after each step() of the primary torch optimizer. Returns True when a
    hook is (already) installed. Repeated calls only replace step_fn. torch not installed:
    False, logged at DEBUG. torch present but no hook possible: False and one WARNING.
    `torch_module` replaces `import torch` (tests)."""
    with _lock:
        if _state["mode"] is not None:
            _set_callback(step_fn)
            return True
        if _state["failed"]:
            return False
        if os.environ.get("MSMONITOR_NO_OPTIMIZER_HOOK") == "1":
            _log("DEBUG", "MSMONITOR_NO_OPTIMIZER_HOOK=1: no optimizer step hook")
            return False
        torch = torch_module
        if torch is None:
            try:
                if importlib.util.find_spec("torch") is None:
                    _log("DEBUG", "torch not installed: no optimizer step hook")
                    return False
                import torch  # pylint: disable=import-outside-toplevel
            except Exception as err:  # noqa: BLE001 (a broken torch install)
                return _fail(f"import torch failed: {err}")
        try:
            c = _optstep_c()
            _state["c"] = c.Hook(_cb_warn) if c is not None else None
            ok = _install(torch)
        except Exception as err:  # noqa: BLE001
            ok = _fail(f"{type(err).__name__}: {err}")
        # After a failure half-way, wrappers already in place stay inert: no callback.
        _set_callback(step_fn if ok else None)
        return ok


def _fail(reason):
    _state["failed"] = True
    _log("WARNING", f"optimizer step hook not installed ({reason}); call "
         "msmonitor.dynamic_profile.step() once per iteration to be monitored")
    return False


def _install(torch):
    optim = getattr(torch, "optim", None)
    opt_cls = getattr(optim, "Optimizer", None)
    if not isinstance(opt_cls, type):
        return _fail("torch.optim.Optimizer not found")
    # torch.optim deletes its submodule names on some versions (1.13): fall back to sys.modules.
    mod = getattr(optim, "optimizer", None)
    if not isinstance(mod, types.ModuleType):
        mod = sys.modules.get(f"{getattr(torch, '__name__', 'torch')}.optim.optimizer")
    register = getattr(mod, "register_optimizer_step_post_hook", None)
    if callable(register):
        _wrap_init(opt_cls, patch_class=False)
        register(_post_hook)
        _state["mode"] = "post_hook"
    else:
        _state["opt_cls"] = opt_cls
        _patch_tree(opt_cls, opt_cls)
        _hook_subclassing(opt_cls)
        _wrap_init(opt_cls, patch_class=True)
        _hook_schedulers(torch, optim)
        _state["mode"] = "wrap"
    _log("DEBUG", f"optimizer step hook installed ({_state['mode']}, torch "
         f"{getattr(torch, '__version__', '?')})")
    return True


# The optimizer step wrapper, the primary optimizer and the callback live in C
# (IPCMonitor_C.optstep) when the extension is loaded: the wrapper is one call and no Python
# frame (docs/benchmarks.md#the-always-on-cost-of-a-step). The Python code below serves when it
# is not (tests of both). _USE_C (below, shared with the forward hook) chooses at install().

def _ext(name):
    """IPCMonitor_C.<name> when the extension is loaded and _USE_C, else None."""
    ext = sys.modules.get("IPCMonitor_C") if _USE_C else None
    return getattr(ext, name, None)


def _optstep_c():
    return _ext("optstep")


def _cb_warn(msg):
    _log("WARNING", f"step hook callback failed: {msg}")


def _set_callback(step_fn):
    _state["callback"] = step_fn
    if _state["c"] is not None:
        _state["c"].set_callback(step_fn)


def _is_wrapper(fn):
    """True when fn is one of our optimizer step wrappers (C or Python)."""
    c = _optstep_c()
    if c is not None and isinstance(fn, c.Wrap):
        return True
    return getattr(fn, "__code__", None) is _PY_WRAPPER_CODE


# -- which optimizer counts --

def _claim(opt):
    if _state["c"] is not None:
        _state["c"].claim(opt)
        return
    try:
        _state["primary"] = weakref.ref(opt)
    except TypeError:          # no weakref support: hold it (an optimizer lives for the run)
        _state["primary"] = lambda: opt


def _fire(opt):
    state = _state
    if state["c"] is not None:
        state["c"].fire(opt)
        return
    ref = state["primary"]
    primary = ref() if ref is not None else None
    if primary is None:
        _claim(opt)
        primary = opt
    if primary is not opt:
        return
    callback = state["callback"]
    if callback is None:
        return
    try:
        callback()
    except Exception as err:  # noqa: BLE001 (never break optimizer.step())
        if not _state["cb_warned"]:
            _state["cb_warned"] = True
            _cb_warn(err)


def _wrap_init(opt_cls, patch_class):
    orig = opt_cls.__dict__.get("__init__", opt_cls.__init__)
    if getattr(orig, _MARK, False):
        return

    @functools.wraps(orig)
    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        if patch_class:
            _patch_tree(type(self), opt_cls, walk_subclasses=False)
        _claim(self)

    setattr(__init__, _MARK, True)
    opt_cls.__init__ = __init__


# -- PyTorch >= 2.0 --

def _post_hook(optimizer, _args, _kwargs):
    # torch runs post hooks from its step wrapper, one per patched class: a subclass step
    # calling super().step() on a class that is patched too runs them twice. Count only the
    # outermost: no caller frame of the same wrapper code for the same optimizer.
    try:
        wrapper = sys._getframe(1)  # pylint: disable=protected-access
        frame = wrapper.f_back
        while frame is not None:
            if frame.f_code is wrapper.f_code and frame.f_locals.get("self") is optimizer:
                return
            frame = frame.f_back
    except (AttributeError, ValueError):
        pass
    _fire(optimizer)


# -- older PyTorch: wrap `step` on the classes --

def _depths():
    d = getattr(_tls, "depth", None)
    if d is None:
        d = _tls.depth = {}
    return d


def _counted(opt, call, args, kwargs):
    """Run one step of `opt`; fire after the outermost one of this thread returns."""
    if _state["c"] is not None:
        return _state["c"].run(opt, call, *args, **kwargs)
    depths = _depths()
    key = id(opt)
    outer = key not in depths
    depths[key] = depths.get(key, 0) + 1
    try:
        out = call(*args, **kwargs)
    finally:
        if depths[key] == 1:
            del depths[key]
        else:
            depths[key] -= 1
    if outer:
        _fire(opt)
    return out


def _wrap_step(fn):
    if _state["c"] is not None:
        wrapper = functools.update_wrapper(_state["c"].wrap(fn), fn)
        setattr(wrapper, _MARK, True)
        return wrapper
    return _py_wrap_step(fn)


def _py_wrap_step(fn):
    # _counted() written out: this runs at every training step, so no argument tuple is
    # rebuilt and no helper is called unless a super().step() nests
    # (docs/benchmarks.md#the-always-on-cost-of-a-step)
    @functools.wraps(fn)
    def step(self, *args, **kwargs):
        try:
            depths = _tls.depth
        except AttributeError:
            depths = _tls.depth = {}
        key = id(self)
        if key in depths:               # a subclass's super().step(): counted by the outer one
            depths[key] += 1
            try:
                return fn(self, *args, **kwargs)
            finally:
                depths[key] -= 1
        depths[key] = 1
        try:
            out = fn(self, *args, **kwargs)
        finally:
            del depths[key]
        _fire(self)
        return out

    setattr(step, _MARK, True)
    return step


_PY_WRAPPER_CODE = _py_wrap_step(lambda self: None).__code__


def _wrap_instance_step(opt, inst):
    """`opt.step` is an instance attribute (an LR scheduler's step counter built before
    install(), bound to the class function as it was then): wrap that attribute."""
    ref = weakref.ref(opt)

    def step(*args, **kwargs):
        return _counted(ref(), inst, args, kwargs)

    try:
        step = functools.wraps(inst)(step)     # keeps torch's `_with_counter` mark
    except (AttributeError, TypeError):
        pass
    setattr(step, _MARK, True)
    return step


def _adopt(opt):
    inst = getattr(opt, "__dict__", {}).get("step")
    if inst is None or not callable(inst) or getattr(inst, _MARK, False):
        return
    if isinstance(opt, _state["opt_cls"]):
        opt.step = _wrap_instance_step(opt, inst)


def _wrap_sched_step(fn):
    @functools.wraps(fn)
    def step(self, *args, **kwargs):
        try:
            _adopt(getattr(self, "optimizer", None))
        except Exception:  # noqa: BLE001 (never break scheduler.step())
            pass
        return fn(self, *args, **kwargs)

    setattr(step, _MARK, True)
    return step


def _hook_schedulers(torch, optim):
    """Schedulers built before install() have already replaced their optimizer's `step` by an
    instance attribute that bypasses the class: their step() hands it to _adopt(), so such an
    optimizer counts from its first scheduler step on. No gc scan."""
    lrs = getattr(optim, "lr_scheduler", None)
    if not isinstance(lrs, types.ModuleType):
        lrs = sys.modules.get(f"{getattr(torch, '__name__', 'torch')}.optim.lr_scheduler")
    bases = [getattr(lrs, n, None) for n in ("_LRScheduler", "LRScheduler", "ReduceLROnPlateau")]
    seen, queue = set(), [b for b in bases if isinstance(b, type)]
    while queue:
        c = queue.pop()
        if c in seen:
            continue
        seen.add(c)
        fn = c.__dict__.get("step")
        if isinstance(fn, types.FunctionType) and not getattr(fn, _MARK, False):
            c.step = _wrap_sched_step(fn)
        queue.extend(type.__subclasses__(c))


def _patch_class(cls):
    fn = cls.__dict__.get("step")
    if isinstance(fn, types.FunctionType) and not getattr(fn, _MARK, False):
        cls.step = _wrap_step(fn)


def _patch_tree(cls, opt_cls, walk_subclasses=True):
    """Patch `cls`, its optimizer bases and (walk_subclasses) every subclass defined so far."""
    for base in cls.__mro__:
        if isinstance(base, type) and issubclass(base, opt_cls):
            _patch_class(base)
    if not walk_subclasses:
        return
    seen, queue = set(), [cls]
    while queue:
        c = queue.pop()
        if c in seen:
            continue
        seen.add(c)
        _patch_class(c)
        queue.extend(type.__subclasses__(c))


def _hook_subclassing(opt_cls):
    orig = opt_cls.__dict__.get("__init_subclass__")
    orig_fn = orig.__func__ if isinstance(orig, classmethod) else None
    if orig_fn is not None and getattr(orig_fn, _MARK, False):
        return

    def __init_subclass__(cls, **kwargs):
        if orig_fn is not None:
            orig_fn(cls, **kwargs)
        else:
            super(opt_cls, cls).__init_subclass__(**kwargs)
        _patch_class(cls)

    setattr(__init_subclass__, _MARK, True)
    opt_cls.__init_subclass__ = classmethod(__init_subclass__)


# -- forward hook: a step source for loops without an optimizer (inference, custom optimizers) --
#
# One step per outermost forward(): of one module (install_forward(model)), or, with no module
# named, of any module (global module hooks; nested sub-module forwards do not count). Chosen
# by MSMONITOR_STEP_HOOK=forward, or automatically for vLLM >= 0.11 workers (see
# step_source()). docs/python.md "The forward hook".

_fwd = {
    "callback": None,    # step_fn of the latest install_forward()
    "global": False,     # the module-wide hooks are registered
    "handles": [],       # RemovableHandles of the per-module hooks
    "warned": False,
}

_VLLM_MIN = (0, 11)


def _version_tuple(text):
    parts = []
    for piece in str(text).split(".")[:2]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    while len(parts) < 2:
        parts.append(0)
    return tuple(parts)


def vllm_version():
    """The importable vLLM's version as a (major, minor) tuple, or None when vLLM is not
    importable. Reads the installed metadata first; a package without it (a source tree on
    sys.path) is imported for its __version__."""
    try:
        if importlib.util.find_spec("vllm") is None:
            return None
    except (ImportError, ValueError):
        return None
    mod = sys.modules.get("vllm")
    text = getattr(mod, "__version__", None) if mod is not None else None
    if text is None:
        try:
            import importlib.metadata as md  # pylint: disable=import-outside-toplevel
            text = md.version("vllm")
        except Exception:  # noqa: BLE001 (no metadata: a source tree)
            text = None
    if text is None:
        try:
            import vllm  # pylint: disable=import-outside-toplevel
            text = getattr(vllm, "__version__", None)
        except Exception as err:  # noqa: BLE001 (a broken vllm must not break the job)
            _log("DEBUG", f"vllm is on the path but cannot be imported: {err}")
            return None
    return _version_tuple(text) if text is not None else None


def step_source():
    """Which step source init() installs: MSMONITOR_STEP_HOOK=optimizer|forward|none when set
    (an invalid value warns and counts as unset); else "forward" when vLLM >= 0.11 is
    importable (its workers have no optimizer), else "optimizer"."""
    raw = os.environ.get("MSMONITOR_STEP_HOOK")
    if raw is not None:
        value = raw.strip().lower()
        if value in ("optimizer", "forward", "none"):
            return value
        _log("WARNING", f"MSMONITOR_STEP_HOOK='{raw}' is not one of optimizer, forward, none; "
             "using the default")
    version = vllm_version()
    if version is not None and version >= _VLLM_MIN:
        _log("INFO", f"vLLM {version[0]}.{version[1]} found: one step per model forward (forward hook)")
        return "forward"
    return "optimizer"


def _fwd_fire():
    callback = _fwd["callback"]
    if callback is None:
        return
    try:
        callback()
    except Exception as err:  # noqa: BLE001 (never break forward())
        if not _fwd["warned"]:
            _fwd["warned"] = True
            _log("WARNING", f"forward hook callback failed: {err}")


def _fwd_pre(module, _inputs):
    # Thread-local depth of module forwards: the outermost one is the step. A forward that
    # raised left the depth up; the outermost module entered again resets it.
    depth = getattr(_tls, "fwd_depth", 0)
    if depth == 0 or getattr(_tls, "fwd_outer", None) is module:
        _tls.fwd_outer = module
        depth = 0
    _tls.fwd_depth = depth + 1


def _fwd_post(module, _inputs, _output):
    depth = getattr(_tls, "fwd_depth", 0) - 1
    _tls.fwd_depth = max(depth, 0)
    if depth <= 0 and getattr(_tls, "fwd_outer", None) is module:
        _tls.fwd_outer = None
        _fwd_fire()


# -- module-wide: torch's global pre hook only while no forward runs --
#
# With a module-wide hook in torch's global table every module call leaves torch's hook-free
# fast path and runs the hooks: a step would cost a few hook calls per module of the model
# (hundreds for a real one). So the global pre hook (_glob_pre) sits in torch's table only
# while no outermost forward runs anywhere in the process: it sees a module forward begin
# (the outermost one, the root), takes itself out of the table, and puts a pre and a post
# hook on the root module for as long as forwards of that root run. Modules nested in the
# forward take the fast path; the root's post hook sees its end, fires the step and puts the
# global hook back. A step costs two hook calls and a few dict operations, whatever the
# model's size, and the root's hook tables are as they were between steps (nothing of ours
# is pickled with the model). The root's own pre hook sees another thread's outermost call
# of the same root, and a call after a forward of this thread raised (as the recovery rule
# of _fwd_pre). A module first called at the top of one thread while another thread's
# forward runs is not seen until it is called while none runs.

# Set once by _glob_install (module globals: read at every step, a dict lookup fewer each).
# Every count in _glob_active is a thread whose _tls.groot holds that root, so its id is not
# reused while counted.
_G_TABLE = None          # torch's _global_forward_pre_hooks
_G_ID = None             # our key in it
_R_ID = None             # our key in a root module's _forward_pre_hooks / _forward_hooks
_glob_active = {}        # id(root) -> outermost forwards of it running
_glob_lock = threading.Lock()


def _glob_pre(module, _inputs):
    # In torch's table only while no forward runs: `module` is the outermost one. Also the
    # entry of _glob_root_pre.
    _glob_lock.acquire()
    try:
        _tls.groot = module
        key = id(module)
        n = _glob_active.get(key, 0)
        _glob_active[key] = n + 1
        if n == 0:
            module._forward_pre_hooks[_R_ID] = _glob_root_pre    # pylint: disable=protected-access
            module._forward_hooks[_R_ID] = _glob_root_post       # pylint: disable=protected-access
        _G_TABLE.pop(_G_ID, None)
    finally:
        _glob_lock.release()


def _glob_root_pre(module, inputs):
    # On a root while its forwards run: this thread's outermost call of it (another thread's
    # is running), or a call of it again after this thread's forward of it raised.
    if getattr(_tls, "groot", None) is None:
        _glob_pre(module, inputs)


def _glob_root_post(module, _inputs, _output):
    if getattr(_tls, "groot", None) is not module:
        return                  # nested in another root of this thread
    _tls.groot = None
    _glob_lock.acquire()
    try:
        key = id(module)
        n = _glob_active.get(key, 1) - 1
        if n > 0:
            _glob_active[key] = n
        else:
            _glob_active.pop(key, None)
            # the global hook back first: a call of this root from another thread right now
            # meets one of ours either way (entering takes ours off in the other order)
            if not _glob_active:
                _G_TABLE[_G_ID] = _glob_pre
            module._forward_pre_hooks.pop(_R_ID, None)   # pylint: disable=protected-access
            module._forward_hooks.pop(_R_ID, None)       # pylint: disable=protected-access
    finally:
        _glob_lock.release()
    _fwd_fire()


# The same three hooks in C (IPCMonitor_C.fwdhook) when the extension is loaded: a call each
# and no Python frame. False makes the Python ones serve (tests of both).
_USE_C = True


def _fwdhook_c():
    return _ext("fwdhook")


def _fwd_warn(msg):
    _log("WARNING", f"forward hook callback failed: {msg}")


def _glob_install(mod):
    """Register the module-wide hook through torch's API (for its key), and reserve a key for
    the roots' tables. Raises what torch raises."""
    global _G_TABLE, _G_ID, _R_ID  # pylint: disable=global-statement
    c = _fwdhook_c()
    handle = mod.register_module_forward_pre_hook(c.glob_pre if c else _glob_pre)
    spare = mod.register_module_forward_hook(_glob_root_post)
    spare.remove()              # only its id: ids are never reused
    table = mod._global_forward_pre_hooks  # pylint: disable=protected-access
    if c:
        # the step callback itself, no Python frame around it (install_forward() replaces it)
        c.setup(table, handle.id, spare.id, _fwd["callback"] or (lambda: None), _fwd_warn)
        _fwd["c"] = c
    else:
        _G_TABLE, _G_ID, _R_ID = table, handle.id, spare.id


def _forward_uninstall():
    """Take the module-wide hook out of torch's table again (tests: each loads its own copy of
    this module into one process)."""
    global _G_TABLE  # pylint: disable=global-statement
    with _lock, _glob_lock:
        if _G_TABLE is not None:
            _G_TABLE.pop(_G_ID, None)
            _G_TABLE = None
        _glob_active.clear()
        if _fwd.get("c") is not None:
            _fwd.pop("c").clear()
        _fwd["global"] = False


def forward_installed():
    """True when a forward hook (per module or module-wide) is in place."""
    return bool(_fwd["global"] or _fwd["handles"])


def install_forward(module=None, step_fn=None, torch_module=None):
    """Call step_fn() (default: msmonitor.dynamic_profile.step) after each outermost forward()
    of `module`, or of any torch.nn.Module when module is None. Returns True when the hook is
    in place; never raises. Repeated calls replace step_fn; a module already hooked is not
    hooked twice. `torch_module` replaces `import torch` (tests)."""
    with _lock:
        if step_fn is None:
            from . import dynamic_profile  # pylint: disable=import-outside-toplevel
            step_fn = dynamic_profile.step
        _fwd["callback"] = step_fn
        if _fwd.get("c") is not None:
            _fwd["c"].set_callback(step_fn)
        try:
            if module is not None:
                if getattr(module, _MARK, False):
                    return True
                _fwd["handles"].append(module.register_forward_pre_hook(_fwd_pre))
                _fwd["handles"].append(module.register_forward_hook(_fwd_post))
                setattr(module, _MARK, True)
                _log("DEBUG", f"forward step hook on {type(module).__name__}")
                return True
            if _fwd["global"]:
                return True
            torch = torch_module
            if torch is None:
                import torch  # pylint: disable=import-outside-toplevel
            mod = sys.modules.get(f"{getattr(torch, '__name__', 'torch')}.nn.modules.module")
            if mod is None:
                mod = torch.nn.modules.module
            _glob_install(mod)
            _fwd["global"] = True
            _log("DEBUG", "forward step hook on every module (outermost forward = one step)")
            return True
        except Exception as err:  # noqa: BLE001
            _log("WARNING", f"forward step hook not installed ({type(err).__name__}: {err}); call "
                 "msmonitor.dynamic_profile.step() once per iteration to be monitored")
            return False
