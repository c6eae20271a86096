"""Strict JSON text (RFC 8259): what every JSON file netesto writes holds: no NaN, no Infinity.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which JavaScript's
``JSON.parse`` and every strict parser refuse; a number nobody has is ``null``.

>>> dumps({"a": [1.0, float("nan")], "b": {"c": float("inf")}})
'{"a": [1.0, null], "b": {"c": null}}'
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float (at any depth) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(data: Any, **kw: Any) -> str:
    """Strict JSON of ``data``: NaN and infinities as null, other values JSON cannot hold as text."""
    return json.dumps(finite(data), allow_nan=False, default=str, **kw)


__all__ = ["dumps", "finite"]
