"""PyDynamicMonitorProxy: the interface torch_npu and MindSpore call (docs/design/session.md#python-surface).
Every method is a classmethod over IPCMonitor_C; without the extension they return the
"nothing happened" value."""
from . import _contract as C
from ._ipcmonitor_C import IPCMonitor_C
from .singleton import Singleton
from .utils import get_parallel_group_info


@Singleton
class PyDynamicMonitorProxy:
    @classmethod
    def init_dyno(cls, npu_id: int) -> bool:
        if IPCMonitor_C is None:
            return False
        return IPCMonitor_C.init_dyno(npu_id)

    @classmethod
    def poll_dyno(cls) -> str:
        if IPCMonitor_C is None:
            return ""
        return IPCMonitor_C.poll_dyno()

    @classmethod
    def enable_dyno_npu_monitor(cls, config_map: dict):
        if IPCMonitor_C is None:
            return
        if isinstance(config_map, dict) and C.config_true(str(config_map.get(C.KEY_NPU_MONITOR_STOP))):
            # The session end writes the cluster layout next to the data (docs/design/outputs.md).
            cls.set_cluster_config_data({"parallel_group_info": get_parallel_group_info()})
        IPCMonitor_C.enable_dyno_npu_monitor(config_map)

    @classmethod
    def finalize_dyno(cls):
        if IPCMonitor_C is None:
            return
        IPCMonitor_C.finalize_dyno()

    @classmethod
    def update_profiler_status(cls, status: dict):
        if IPCMonitor_C is None:
            return
        IPCMonitor_C.update_profiler_status(status)

    @classmethod
    def set_cluster_config_data(cls, cluster_config: dict):
        if IPCMonitor_C is None:
            return
        IPCMonitor_C.set_cluster_config_data(cluster_config)
