"""Names that become file names or tool arguments on an agent or controller: one check for both sides.

A flow id, an experiment name, a host label in a pcap or ping file name travels
in a message and ends up in a path (``<datadir>/<exp>/flows/<flow id>.client.nflow``)
or on a tool's command line. :func:`check_name` is the one gate: a letter, digit
or ``_`` first (so never ``-``, read as an option, nor ``.``), then letters,
digits and ``_ . : @ + -``; no ``/``, so no path can be named, and never ``..``.

>>> check_name("flow id", "h2-h1-0-1")
'h2-h1-0-1'
>>> check_name("flow id", "x/../../etc/pwned")
Traceback (most recent call last):
...
netesto.errors.UsageError: bad flow id 'x/../../etc/pwned': expected a letter, digit or _ then [A-Za-z0-9_.:@+-] (at most 200)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from netesto.errors import UsageError

MAX_NAME = 200
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]*")


def is_name(value: Any, max_len: int = MAX_NAME) -> bool:
    """Whether ``value`` is a string :func:`check_name` accepts."""
    return (isinstance(value, str) and 0 < len(value) <= max_len and _NAME.fullmatch(value) is not None
            and ".." not in value)


def check_name(what: str, value: Any, max_len: int = MAX_NAME) -> str:
    """``value`` if it is a safe name, else UsageError naming ``what``."""
    if not is_name(value, max_len):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise UsageError(f"bad {what} {shown}: expected a letter, digit or _ then [A-Za-z0-9_.:@+-] "
                         f"(at most {max_len})")
    return str(value)


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with symlinks and ``..`` resolved, lies within ``root``."""
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


__all__ = ["MAX_NAME", "check_name", "inside", "is_name"]
