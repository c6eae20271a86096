"""Pass/fail criteria of a sweep, one expression over each point's summary.

A kernel CI gates on a sweep as the BBR team's transperf scores its runs::

    netesto sweep sweep.ipynb -p ca=cubic,bbr --check 'jain >= 0.9' --check 'retrans_pkts_pct < 1'
    netesto sweep sweep.ipynb -p ca=bbr+cubic --check 'cc_share_bbr < 0.8'

Expressions use :mod:`netesto.results.safeexpr` (never ``eval``) over the
summary variables of :data:`netesto.results.sweep.SUMMARY_UNITS` (``rate``,
``mean_rtt``, ``retrans_pkts_pct``, ``jain`` ...) and the per-algorithm and
per-group numbers as ``cc_<measure>_<algorithm>`` and ``grp_<measure>_<group>``
(``cc_share_bbr``, ``grp_rate_2``). A point with several experiments takes their
mean; a check over a number the point does not have fails.
"""

from __future__ import annotations

import ast
import difflib
import re
from typing import Any, Mapping, Sequence

from netesto.errors import ResultsError, SweepError


def names() -> list[str]:
    from netesto.results.sweep import SUMMARY_UNITS

    return list(SUMMARY_UNITS)


def _part_name() -> "re.Pattern[str]":
    from netesto.results.groups import DIMS, MEASURES

    return re.compile(rf"^({'|'.join(DIMS)})_({'|'.join(sorted(MEASURES, key=len, reverse=True))})_[A-Za-z0-9_]+$")


def flat(summary: Mapping[str, float], parts: Mapping[str, Any]) -> dict[str, float]:
    """A point's numbers as checks name them: the summary, and ``cc_share_bbr``, ``grp_rate_2`` ...

    >>> flat({"jain": 0.9}, {"cc": {"bbr": {"share": 0.7}}, "grp": {"1": {"rate": None}}})
    {'jain': 0.9, 'cc_share_bbr': 0.7, 'grp_rate_1': nan}
    """
    out = dict(summary)
    for dim in ("cc", "grp"):
        for key, row in (parts.get(dim) or {}).items():
            for m, v in row.items():
                out[f"{dim}_{m}_{key}"] = float("nan") if v is None else v
    return out


def parse(text: str) -> ast.Expression:
    """``text`` parsed, every name a summary variable (else a SweepError saying which)."""
    from netesto.results import safeexpr

    try:
        tree = safeexpr.parse(text)
    except ResultsError as exc:
        raise SweepError(f"--check {text!r}: {exc.message}") from None
    known = names()
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and id(node) not in calls and node.id not in known \
                and not _part_name().match(node.id):
            close = difflib.get_close_matches(node.id, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SweepError(f"--check {text!r}: unknown measurement {node.id!r}{hint} (have {', '.join(known)}, "
                              "and cc_<measure>_<algorithm>, grp_<measure>_<group> such as cc_share_bbr)")
    return tree


def evaluate(checks: Sequence[str], values: dict[str, float]) -> dict[str, bool]:
    """Each check's verdict on ``values``; a check over a missing number (NaN), or a name the point
    has no number for (an algorithm it did not run), fails."""
    from netesto.results import safeexpr

    out = {}
    for text in checks:
        parse(text)
        try:
            verdict = safeexpr.evaluate(text, values) if values else False
        except ResultsError:
            verdict = False
        out[text] = bool(verdict) if verdict is not None and verdict == verdict else False
    return out


__all__ = ["evaluate", "flat", "names", "parse"]
