"""msMonitor in-process plugin (mindstudio_monitor): PyDynamicMonitorProxy for frameworks in
dyno mode, the standalone Monitor API and ActivityKind. The packages IPCMonitor and msmonitor
are built from this one source directory and have identical content (docs/design/session.md#python-surface):
torch_npu and MindSpore import IPCMonitor, users import msmonitor."""
from .dynamic_monitor_proxy import PyDynamicMonitorProxy
from .monitor import ActivityKind, Monitor

__all__ = ["PyDynamicMonitorProxy", "Monitor", "ActivityKind"]

from .dynamic_profile import cleanup_stale_shm  # noqa: E402,F401

__all__.append("cleanup_stale_shm")
