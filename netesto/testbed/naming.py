"""Testbed names that two users, or two kernels of one user, never share; and taking one's own name back.

A notebook that brought its testbed up under a fixed name could not be run
again after an interrupt ("testbed 'quick' is up already"), and two users of
one machine running the same notebook took the same name. :func:`own_name`
gives a name per user and process (a notebook's kernel), and ``up(...,
replace=True)`` first takes down a testbed of that name left by its own owner.
"""

from __future__ import annotations

import os
from typing import Callable

from netesto.errors import TestbedError
from netesto.testbed.state import load_state, owned_by_me, owner_text, state_path


def own_name(prefix: str = "nb") -> str:
    """``prefix`` (1-2 lowercase letters) + this user's and this process's numbers, in hex: 11 characters at most.

    >>> import re; bool(re.fullmatch(r"nb[0-9a-f]{2,9}", own_name()))
    True
    """
    if not (1 <= len(prefix) <= 2 and prefix.isalpha() and prefix.islower()):
        raise ValueError(f"own_name prefix {prefix!r}: 1-2 lowercase letters")
    return f"{prefix}{os.getuid() % 4096:x}{os.getpid() % 0x1000000:x}"


def take_back(name: str, down: Callable[[str], list[str]]) -> bool:
    """Take down (with ``down``, the lifecycle's) testbed ``name`` if it is up and this owner's (True);
    another owner's is an error."""
    path = state_path(name)
    if not path.exists():
        return False
    state = load_state(path)
    if not owned_by_me(state):
        raise TestbedError(f"testbed {name!r} is up and belongs to {owner_text(state)}; choose another name")
    problems = down(name)
    if problems:
        raise TestbedError(f"testbed {name!r}: taking it down before bringing it up again: {'; '.join(problems)}")
    return True


__all__ = ["own_name", "take_back"]
