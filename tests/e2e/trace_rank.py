"""A Python training rank for the nputrace tests: dyno mode through msmonitor.dynamic_profile
over the simulated msPTI (`mspti`) or CUPTI (`cupti`). Every step launches KERNELS kernels
named k_s<step>_<i> (the same step number libmsmonitor counts: 1 at init, +1 per step()) and
waits for them, then calls dynamic_profile.step(). Runs until SIGTERM; exits 0."""
import os
import signal
import sys
import time

from msmonitor import dynamic_profile

KERNELS = 3
backend = sys.argv[1]
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
if backend == "cupti":
    from mssim import cupti
    dev = cupti.load()
    launch = lambda name: dev.kernel(name, 20000)  # noqa: E731 - with its cudaLaunchKernel call
    sync = lambda: None  # noqa: E731 - records are appended at once
else:
    import mssim
    dev = mssim.load()
    launch = lambda name: dev.launch_kernel(name, duration_ns=20000)  # noqa: E731
    sync = dev.synchronize
print(f"trace_rank: pid {os.getpid()} init {dynamic_profile.init()}", flush=True)
step = 1
while not stop:
    for i in range(KERNELS):
        launch(f"k_s{step}_{i}")
    sync()
    time.sleep(0.05)
    dynamic_profile.step()
    step += 1
dynamic_profile.finalize()
print(f"trace_rank: finished {step - 1} steps", flush=True)
