"""mssim: Python side of the msPTI SIMULATOR (a libmspti.so test double for machines without
an Ascend NPU). `mssim.load()` returns the ctypes bindings of the driver API (mssim.lib)."""
from .lib import Sim, Stats, WorkloadCfg, default_path, load  # noqa: F401

__all__ = ["Sim", "Stats", "WorkloadCfg", "default_path", "load"]
