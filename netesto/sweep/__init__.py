"""papermill sweeps over parameterized notebooks: a grid of points, a manifest, a cube, a report.

``sweep("notebooks/sweep.ipynb", ["ca=cubic,bbr", "bw=10mbit,100mbit"], reps=3, testbeds=["tb"])``
runs the notebook once per point and repetition; ``open_sweep(dir)`` opens the result.
Importing this package imports neither papermill nor xarray: each entry point does, when called.
"""

from __future__ import annotations

from typing import Any

from netesto._importcost import defer_rfc3987_syntax

defer_rfc3987_syntax()  # papermill and nbclient import nbformat: seconds saved per sweep process


def sweep(*args: Any, **kw: Any) -> Any:
    """Run a sweep (see :func:`netesto.sweep.run.sweep`)."""
    from netesto.sweep.run import sweep as run_sweep

    return run_sweep(*args, **kw)


def open_sweep(directory: Any) -> Any:
    """Open a finished sweep (see :func:`netesto.results.cube.open_sweep`)."""
    from netesto.results.cube import open_sweep as open_

    return open_(directory)


__all__ = ["open_sweep", "sweep"]
