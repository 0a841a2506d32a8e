"""msMonitor in-process plugin (mindstudio_monitor): PyDynamicMonitorProxy for frameworks in
dyno mode, the standalone Monitor API and ActivityKind. The packages IPCMonitor and msmonitor
have the same content; msmonitor adds dynamic_profile (the framework side for any loop)."""
from .dynamic_monitor_proxy import PyDynamicMonitorProxy
from .monitor import ActivityKind, Monitor

__all__ = ["PyDynamicMonitorProxy", "Monitor", "ActivityKind"]

try:  # msmonitor only: the package IPCMonitor has no dynamic_profile module
    from .dynamic_profile import cleanup_stale_shm  # noqa: F401
    __all__.append("cleanup_stale_shm")
except ImportError:
    pass
