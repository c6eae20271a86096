"""A lab on one machine: network namespaces, a bottleneck router, agents inside.

``up(TestbedConfig.parse(hosts=3, bw="100mbit", rtt="20ms"))`` builds one and
returns where its lab file is; ``down(name)`` removes it; ``testbed(...)`` is
both as a context manager. The names are loaded lazily so that
``python -m netesto.testbed.delayline`` starts without the rest.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TestbedConfig", "UpResult", "down", "status", "testbed", "up"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from netesto.testbed import lifecycle

        return getattr(lifecycle, name)
    raise AttributeError(f"module 'netesto.testbed' has no attribute {name!r}")
