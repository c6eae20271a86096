"""How long a plan takes: the wall time its actions need, from the actions alone."""

from __future__ import annotations

from typing import Iterable

from netesto.script.actions import Action, DoClient, DoServer, GetData, ProcessExp, RandWait, Wait


def estimate_seconds(actions: Iterable[Action]) -> float:
    """Wall time a plan needs: WAITs, the mean of each RAND_WAIT, and the waits the
    runner makes for flows (GET_DATA and DO_SERVER order=1 of a host wait until its
    flows have ended; the run ends after every flow, whose data it then fetches)."""
    t = 0.0
    ends: dict[tuple[int, str], float] = {}  # (exp, host) -> end of its last flow
    exp_ends: dict[int, float] = {}
    last = 0.0
    for action in actions:
        if isinstance(action, Wait):
            t += action.seconds
        elif isinstance(action, RandWait):
            t += (action.low + action.high) / 2
        elif isinstance(action, DoClient):
            end = t + action.delay + action.dur
            for host in (action.host, action.server):
                ends[(action.exp, host)] = max(ends.get((action.exp, host), 0.0), end)
            exp_ends[action.exp] = max(exp_ends.get(action.exp, 0.0), end)
            last = max(last, end)
        elif isinstance(action, GetData) or (isinstance(action, DoServer) and action.order >= 1):
            t = max(t, ends.get((action.exp, action.host), 0.0))
        elif isinstance(action, ProcessExp):
            t = max(t, exp_ends.get(action.exp, 0.0))
    return max(t, last)


def clock(seconds: float) -> str:
    """``1:05`` (m:ss) or ``1:02:05`` (h:mm:ss).

    >>> clock(65), clock(3725.4)
    ('1:05', '1:02:05')
    """
    whole = int(round(seconds))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


__all__ = ["clock", "estimate_seconds"]
