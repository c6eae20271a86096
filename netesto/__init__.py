"""netesto: multi-host TCP experiments from Jupyter (a reimplementation of Netesto).

The package root is light: importing it pulls in no xarray, IPython or bokeh,
so lab hosts that only run ``netesto-agent`` stay small. Heavier entry points
(``run``, ``open_experiment``, ...) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from netesto._version import __version__
from netesto.errors import (
    AgentError,
    AgentUnreachable,
    NetestoError,
    ProtocolError,
    ResultsError,
    ScriptError,
    UsageError,
)

# name -> "module:attribute", imported on first access (PEP 562).
_LAZY = {
    "Lab": "netesto.controller:Lab",
    "Table": "netesto.results:Table",
    "combine": "netesto.results:combine",
    "open_experiment": "netesto.results:open_experiment",
    "open_experiments": "netesto.results:open_experiments",
    "open_sweep": "netesto.sweep:open_sweep",
    "plan": "netesto.script:plan",
    "process_experiment": "netesto.report.experiment:process_experiment",
    "run": "netesto.controller:run",
    "sweep": "netesto.sweep:sweep",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'netesto' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext netesto``: register the ``%%netesto`` magics."""
    from netesto.magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    "AgentError",
    "AgentUnreachable",
    "Lab",
    "NetestoError",
    "ProtocolError",
    "ResultsError",
    "ScriptError",
    "Table",
    "UsageError",
    "__version__",
    "combine",
    "load_ipython_extension",
    "open_experiment",
    "open_experiments",
    "open_sweep",
    "plan",
    "process_experiment",
    "run",
    "sweep",
]
