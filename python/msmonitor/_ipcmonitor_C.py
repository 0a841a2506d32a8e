"""Loads the C extension IPCMonitor_C from this package's lib64 directory (the extension
links libmsmonitor.so from the same directory through RPATH $ORIGIN). When the extension
cannot be loaded, IPCMonitor_C is None and every wrapper degrades to a no-op."""
import os
import sys

_LIB64 = os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib64")
if _LIB64 not in sys.path:
    sys.path.append(_LIB64)

try:
    import IPCMonitor_C  # noqa: E402,N813
except ImportError as err:  # the application keeps running with monitoring off
    print(f"[WARNING] msMonitor extension IPCMonitor_C could not be loaded: {err}", file=sys.stderr)
    IPCMonitor_C = None
