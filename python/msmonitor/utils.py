"""Rank and communicator discovery for the plugin (docs/design/session.md#python-surface). Frameworks are only
consulted when the process already imported them: a framework that is not loaded cannot have
initialised its distributed runtime, and importing one here would cost seconds."""
import json
import os
import sys


def _warn(msg):
    print(f"[WARNING] {msg}", file=sys.stderr)


def _torch_rank():
    env = os.environ.get("RANK")
    if env is not None:
        return int(env)
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return None


def _mindspore_rank():
    env = os.environ.get("RANK_ID")
    if env is not None:
        return int(env)
    if sys.modules.get("mindspore") is None:
        return None
    from mindspore import communication  # pylint: disable=import-outside-toplevel
    from mindspore.communication import management  # pylint: disable=import-outside-toplevel
    if getattr(management, "GlobalComm", None) is not None and \
            getattr(management.GlobalComm, "INITED", False):
        return int(communication.get_rank())
    return None


def get_rank_id() -> int:
    """PyTorch first (RANK, then torch.distributed), then MindSpore (RANK_ID, then
    mindspore.communication), else -1 with a warning."""
    for probe in (_torch_rank, _mindspore_rank):
        try:
            rank = probe()
        except Exception:  # noqa: BLE001 (a broken framework is skipped)
            rank = None
        if rank is not None:
            return rank
    _warn("msMonitor: rank id not found (RANK / RANK_ID unset, no distributed runtime); using -1")
    return -1


def _torch_groups():
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    c10d = dist.distributed_c10d
    world = c10d._world  # pylint: disable=protected-access
    default_pg = c10d._get_default_group()  # pylint: disable=protected-access
    info = {}
    for pg, name in world.pg_names.items():
        if str(dist.get_backend(pg)).lower() != "hccl":
            continue
        rank = dist.get_rank(pg)
        comm = pg._get_backend(torch.device("npu")).get_hccl_comm_name(rank)  # pylint: disable=protected-access
        ranks = sorted(dist.get_process_group_ranks(pg))
        info[comm] = {
            "group_name": "default_group" if pg is default_pg else name,
            "group_rank": int(rank),
            "global_ranks": [int(r) for r in ranks],
        }
    return info


def _mindspore_groups():
    if sys.modules.get("mindspore") is None:
        return None
    from mindspore.communication import get_local_rank_size, get_rank  # noqa: F401 pylint: disable=import-outside-toplevel
    from mindspore.communication._comm_helper import _get_group_map  # pylint: disable=import-outside-toplevel
    from mindspore.communication.management import get_group_rank_from_world_rank  # pylint: disable=import-outside-toplevel
    info = {}
    rank = get_rank()
    for name, ranks in _get_group_map().items():
        info[name] = {
            "group_name": name,
            "group_rank": int(get_group_rank_from_world_rank(rank, name)),
            "global_ranks": [int(r) for r in ranks],
        }
    return info


def get_parallel_group_info() -> str:
    """JSON object keyed by HCCL communicator name: {"group_name", "group_rank",
    "global_ranks"}. Any error gives a warning and ""."""
    try:
        for probe in (_torch_groups, _mindspore_groups):
            info = probe()
            if info is not None:
                return json.dumps(info, sort_keys=True)
        return json.dumps({})
    except Exception as err:  # noqa: BLE001
        _warn(f"msMonitor: failed to collect parallel group info: {err}")
        return ""
