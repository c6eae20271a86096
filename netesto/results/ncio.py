"""One lock for the netCDF-C and HDF5 libraries in this process.

Neither library is thread-safe, and netCDF4-python releases the GIL around its
calls into them (since 1.6.1): two threads opening, reading or writing files at
once can crash the whole process with a segmentation fault or a bus error
(Unidata/netcdf4-python#1192, pydata/xarray#9779). A sweep over several labs
summarizes each point in its lab's thread while another point's thread does the
same and the main thread may write the cube; a notebook user may open
experiments from threads too. Every open, read and write of ``exp.nc`` and
``sweep.nc`` in netesto holds :data:`NC_LOCK` (re-entrant: a cube's build opens
experiments). The lazy reads of ``Sweep.flows()`` go through xarray's own locks.
"""

from __future__ import annotations

import threading

NC_LOCK = threading.RLock()

__all__ = ["NC_LOCK"]
