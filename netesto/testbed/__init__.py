"""A lab on one machine: network namespaces, a bottleneck router, agents inside.

``up(TestbedConfig.parse(hosts=3, bw="100mbit", rtt="20ms"))`` builds one and
returns where its lab file is; ``reshape(name, bw=..., rtt=...)`` changes
its bottleneck in place; ``down(name)`` removes it; ``testbed(...)`` is
both as a context manager. The names are loaded lazily so that
``python -m netesto.testbed.delayline`` starts without the rest.
"""

from __future__ import annotations

from typing import Any

import importlib

__all__ = ["TestbedConfig", "UpResult", "down", "own_name", "reshape", "status", "testbed", "up"]
_MODULE = {"TestbedConfig": "config", "UpResult": "config", "reshape": "inplace", "own_name": "naming"}  # name -> module, where not lifecycle


def __getattr__(name: str) -> Any:
    if name in __all__:
        module = importlib.import_module(f"netesto.testbed.{_MODULE.get(name, 'lifecycle')}")
        return getattr(module, name)
    raise AttributeError(f"module 'netesto.testbed' has no attribute {name!r}")
