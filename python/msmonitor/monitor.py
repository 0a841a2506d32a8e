"""Monitor: the standalone activity monitor (docs/design/session.md#standalone-monitor). No daemon needed; records
are kept in memory until the next start, so use it for short captures."""
from ._contract import STANDALONE_KINDS
from ._ipcmonitor_C import IPCMonitor_C
from .file_manager import is_valid_path

_mon = IPCMonitor_C.monitor if IPCMonitor_C is not None else None
ActivityKind = _mon.ActivityKind if _mon is not None else None

# One getter per standalone kind, named after the kind (the contract's table).
_GETTERS = {name: f"get_{stem}_data" for name, stem in STANDALONE_KINDS}


class Monitor:
    def start(self, kinds):
        if _mon is None:
            return
        if not isinstance(kinds, list) or not kinds or \
                not all(isinstance(k, ActivityKind) for k in kinds):
            print("[ERROR] Invalid activity kind list")
            return
        _mon.start_monitor(kinds)

    def stop(self):
        if _mon is None:
            return
        _mon.stop_monitor()

    def get_result(self) -> dict:
        """{ActivityKind: [record, ...]} for the kinds of the last start; call after stop()."""
        kinds = _mon.get_kinds() if _mon is not None else []
        if not kinds:
            print("[WARNING] No valid activity kind")
            return {}
        return {k: getattr(_mon, _GETTERS[k.name])() for k in kinds}

    def save(self, path):
        """Write the last session as an xlsx workbook (docs/design/outputs.md#xlsx)."""
        if not is_valid_path(path):
            print("[ERROR] Invalid file path")
            return
        if _mon is None:
            print("[WARNING] No valid activity data")
            return
        try:
            _mon.save_xlsx(path)
        except Exception as err:  # noqa: BLE001 (the contract: report, never raise)
            print(f"[ERROR] Failed to save file: {path}, error: {err}")
