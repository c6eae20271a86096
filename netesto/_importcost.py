"""Deferred imports of third-party modules whose import costs seconds and whose use is rare.

``rfc3987_syntax`` (installed by ``jsonschema[format-nongpl]``, which the
Jupyter packages ask for) builds about 40 Earley parsers when it is imported:
4.7 s of CPU on this project's 2-vCPU machines. ``jsonschema`` imports it with
its format checkers, so every process that imports ``nbformat`` (a sweep, a
report, papermill, nbconvert, a test session) paid that, to check ``iri``
formats that no notebook schema has. :func:`defer_rfc3987_syntax` puts a
stand-in in its place whose ``is_valid_syntax`` imports the real module on its
first call: the check works as before, and costs only when it is made.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, Callable

_NAME = "rfc3987_syntax"


def defer_rfc3987_syntax() -> bool:
    """Stand in for ``rfc3987_syntax`` until its ``is_valid_syntax`` is called; whether it was put.

    Nothing is done when it is imported already, or not installed (``jsonschema`` then skips the
    checks it serves, as it would have)."""
    if _NAME in sys.modules:
        return False
    spec = importlib.util.find_spec(_NAME)
    if spec is None:
        return False
    real: list[Callable[..., Any]] = []
    stand_in = types.ModuleType(_NAME, "stands in for rfc3987_syntax until it is used (netesto._importcost)")
    stand_in.__spec__ = spec  # find_spec() answers as before

    def is_valid_syntax(*args: Any, **kwargs: Any) -> Any:
        if not real:
            if sys.modules.get(_NAME) is stand_in:
                del sys.modules[_NAME]
            real.append(importlib.import_module(_NAME).is_valid_syntax)
        return real[0](*args, **kwargs)

    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules[_NAME] = stand_in
    return True


__all__ = ["defer_rfc3987_syntax"]
