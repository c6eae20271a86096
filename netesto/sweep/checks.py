"""Pass/fail criteria of a sweep, one expression over each point's summary.

A kernel CI gates on a sweep as the BBR team's transperf scores its runs::

    netesto sweep sweep.ipynb -p ca=cubic,bbr --check 'jain >= 0.9' --check 'retrans_pkts_pct < 1'

Expressions use :mod:`netesto.results.safeexpr` (never ``eval``) over the
summary variables of :data:`netesto.results.sweep.SUMMARY_UNITS` (``rate``,
``mean_rtt``, ``retrans_pkts_pct``, ``jain`` ...). A point with several
experiments takes their mean.
"""

from __future__ import annotations

import ast
import difflib
from typing import Sequence

from netesto.errors import ResultsError, SweepError


def names() -> list[str]:
    from netesto.results.sweep import SUMMARY_UNITS

    return list(SUMMARY_UNITS)


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
        if isinstance(node, ast.Name) and id(node) not in calls and node.id not in known:
            close = difflib.get_close_matches(node.id, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SweepError(f"--check {text!r}: unknown measurement {node.id!r}{hint} (have {', '.join(known)})")
    return tree


def evaluate(checks: Sequence[str], values: dict[str, float]) -> dict[str, bool]:
    """Each check's verdict on ``values``; a check over a missing number (NaN) fails."""
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


__all__ = ["evaluate", "names", "parse"]
