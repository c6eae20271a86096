"""A sweep's grid: named parameter values, their product, and one point per repetition.

>>> g = parse_grid(["ca=cubic,bbr", "bw=10mbit,100mbit"])
>>> g
{'ca': ['cubic', 'bbr'], 'bw': ['10mbit', '100mbit']}
>>> [p.key for p in points(g, reps=1)][:2]
['ca=cubic,bw=10mbit,rep=0', 'ca=cubic,bw=100mbit,rep=0']
>>> points(g, reps=2)[1].dirname
'p000-ca_cubic-bw_10mbit-r1'
"""

from __future__ import annotations

import itertools
import re
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from netesto.errors import SweepError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")
RESERVED = frozenset({"rep", "point", "exp"})  # dims and coordinates of the sweep cube
# Limits, checked before anything is expanded: each point costs a kernel and an experiment
# (seconds at least), so 10,000 is days of runs; a manifest of them is a few MB.
MAX_POINTS = 10_000  # grid cells times repetitions
MAX_VALUES = 1_000  # values of one parameter
MAX_PARAMS = 32


@dataclass(frozen=True)
class Point:
    """One run of the notebook: the grid values of one cell and a repetition number."""

    index: int  # the grid cell, 0.. (repetitions of a cell share it)
    params: tuple[tuple[str, Any], ...]
    rep: int

    @property
    def key(self) -> str:
        """Stable text naming the point (the manifest's key)."""
        return ",".join([*(f"{k}={v}" for k, v in self.params), f"rep={self.rep}"])

    @property
    def dirname(self) -> str:
        """A directory name: the cell number, the values made file-safe, the repetition."""
        parts = [f"p{self.index:03d}", *(f"{k}_{_UNSAFE.sub('_', str(v))[:24]}" for k, v in self.params), f"r{self.rep}"]
        return "-".join(parts)

    @property
    def seed(self) -> int:
        """A seed derived from the point's key: the same point gets the same seed in every run of the sweep."""
        return zlib.crc32(self.key.encode())

    def as_dict(self) -> dict[str, Any]:
        return dict(self.params)


def parse_grid(items: Iterable[str] | Mapping[str, Any]) -> dict[str, list[Any]]:
    """``["ca=cubic,bbr", "bw=10mbit"]`` (the command line's ``-p``) or a mapping
    ``{"ca": ["cubic", "bbr"], "dur": 3}`` to an ordered ``{name: [values]}``."""
    grid: dict[str, list[Any]] = {}
    pairs: list[tuple[str, Any]] = []
    if isinstance(items, Mapping):
        pairs = list(items.items())
    else:
        for item in items:
            name, sep, values = str(item).partition("=")
            if not sep:
                raise SweepError(f"-p {item!r}: expected NAME=VALUE[,VALUE...], e.g. ca=cubic,bbr")
            if values.count(",") >= MAX_VALUES:  # counted before the text is split
                raise SweepError(f"-p {name.strip()}: {values.count(',') + 1} values (at most {MAX_VALUES})")
            pairs.append((name.strip(), [v.strip() for v in values.split(",")]))
    if len(pairs) > MAX_PARAMS:
        raise SweepError(f"{len(pairs)} parameters (at most {MAX_PARAMS})")
    for name, values in pairs:
        if not _NAME.match(name):
            raise SweepError(f"parameter name {name!r}: letters, digits and _ (a Python name)")
        if name in RESERVED:
            raise SweepError(f"parameter name {name!r} is taken by the sweep itself ({', '.join(sorted(RESERVED))})")
        if name in grid:
            raise SweepError(f"parameter {name!r} given twice: give its values once, comma-separated")
        if isinstance(values, (list, tuple)) and len(values) > MAX_VALUES:
            raise SweepError(f"parameter {name!r}: {len(values)} values (at most {MAX_VALUES})")
        vals = list(values) if isinstance(values, (list, tuple)) else [values]
        if not vals or any(v == "" for v in vals):
            raise SweepError(f"parameter {name!r} has an empty value")
        if len(set(map(str, vals))) != len(vals):
            raise SweepError(f"parameter {name!r} repeats a value: {', '.join(map(str, vals))} (use --reps to repeat)")
        grid[name] = vals
    return grid


def count(grid: Mapping[str, Sequence[Any]], reps: int = 1) -> int:
    """The number of points (cells times ``reps``), from the counts alone: a SweepError past
    :data:`MAX_POINTS`, before any point is made.

    >>> count({"ca": ["cubic", "bbr"], "bw": ["10mbit", "100mbit", "1gbit"]}, reps=3)
    18
    """
    if reps < 1:
        raise SweepError(f"--reps {reps}: at least 1")
    if not grid:
        raise SweepError("the grid is empty: give at least one parameter (-p NAME=VALUE[,VALUE...])")
    total = reps
    for values in grid.values():
        total *= len(values)
        if total > MAX_POINTS:  # stop multiplying: the product of huge counts is itself huge
            sizes = " x ".join(str(len(v)) for v in grid.values())
            raise SweepError(f"the grid has {sizes} cells x {reps} repetition(s): more than {MAX_POINTS} points; "
                             "sweep fewer values, or split the sweep")
    return total


def points(grid: Mapping[str, Sequence[Any]], reps: int = 1) -> list[Point]:
    """Every grid cell (the product of the values, in the order given) times ``reps``."""
    count(grid, reps)
    names = list(grid)
    out = []
    for i, combo in enumerate(itertools.product(*(grid[n] for n in names))):
        for rep in range(reps):
            out.append(Point(i, tuple(zip(names, combo)), rep))
    return out


__all__ = ["MAX_PARAMS", "MAX_POINTS", "MAX_VALUES", "Point", "RESERVED", "count", "parse_grid", "points"]
