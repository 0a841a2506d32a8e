"""The README's demo command (scripts/demo.sh) end to end, without its apt/build steps:
dynolog + the 2-rank simulated job + dyno npu-monitor, then the summary from the DB files."""
import os
import signal

from conftest import BUILD, SOURCE, Proc
from python_util import require_packages


def test_demo_script_runs_and_summarises(tmp_path):
    require_packages()
    shm = tmp_path / "shm"
    shm.mkdir()
    env = dict(os.environ, DEMO_SKIP_SETUP="1", BUILD_DIR=BUILD, DEMO_DIR=str(tmp_path / "demo"),
               MSMONITOR_SHM_DIR=str(shm))
    demo = Proc([os.path.join(SOURCE, "scripts", "demo.sh")], env=env, logname="demo", tmpdir=str(tmp_path))
    try:
        rc = demo.p.wait(180)
    finally:
        demo.stop(signal.SIGTERM, timeout=30)
    out = demo.log()
    assert rc == 0, out[-4000:]
    assert "summary of 2 DB file(s)" in out
    assert "-- top 10 kernels by total device time --" in out
    assert "MatMulBackward" in out
    assert "-- step time per rank (step <N> markers;" in out
    # compact: one line per rank, not one per step (issue 15)
    rows = out.split("-- step time per rank")[1].split("-- communication --")[0].strip().splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["0", "1"], rows
    assert "HcclAllReduce" in out
    dbs = sorted(f for f in os.listdir(tmp_path / "demo" / "out") if f.endswith(".db"))
    assert len(dbs) == 2 and dbs[0].endswith("_0.db") and dbs[1].endswith("_1.db")
    assert os.listdir(shm) == []
    # the DBs were closed cleanly: no SQLite -wal/-shm side files remain (issue 15)
    assert [f for f in os.listdir(tmp_path / "demo" / "out") if f.endswith(("-wal", "-shm"))] == []
