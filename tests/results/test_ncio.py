"""exp.nc read and written from several threads at once: netCDF-C and HDF5 are not thread-safe, and
netCDF4-python releases the GIL around them, so without netesto's one lock this crashed the process
(a segmentation fault within seconds; a sweep over two labs summarizes its points in two threads)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

STRESS = """
import sys, threading, time
from pathlib import Path
from netesto.results.storage import open_experiment, write_netcdf
dirs = [Path(p) for p in sys.argv[1:]]
until = time.monotonic() + 3.0
done = [0] * len(dirs)
def work(i):
    while time.monotonic() < until:
        ds = open_experiment(dirs[i])
        write_netcdf(ds, dirs[i] / "exp.nc")  # a write beside the others' reads
        done[i] += 1
threads = [threading.Thread(target=work, args=(i,)) for i in range(len(dirs))]
for t in threads: t.start()
for t in threads: t.join()
print(*done)
"""


def test_experiments_opened_and_written_from_four_threads_at_once(processed: Path, tmp_path: Path) -> None:
    dirs = []
    for i in range(4):
        dirs.append(tmp_path / "copies" / str(i))
        shutil.copytree(processed / "1", dirs[-1])
    # in a child: a crash is this test's failure (its return code), not the end of the test run
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", STRESS, *map(str, dirs)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(int(n) >= 1 for n in done.stdout.split()), done.stdout
