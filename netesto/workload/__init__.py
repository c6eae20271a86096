"""Stochastic workloads: named distributions of sizes and times, empirical CDFs, a flow's seeded draws.

:func:`parse` reads a distribution as a script writes it (``exp(mean=10K)``,
``cdf(websearch,scale=0.01)``; docs/workloads.md); a :class:`Distribution` knows its
canonical text, quantiles, mean and variance; a :class:`Workload` makes a flow's
reproducible :class:`Draws`. Stdlib only: the engine draws on agent hosts.
"""

from __future__ import annotations

from netesto.workload.cdf import MAX_POINTS, PACKAGED, CdfError, parse_cdf_text
from netesto.workload.dists import (
    FAMILY_NAMES,
    MAX_SIZE,
    MAX_TIME,
    SIZE,
    TIME,
    DistError,
    Distribution,
    did_you_mean,
    parse,
)
from netesto.workload.draws import Draws, Workload, generator, poisson_gap, seed_of

__all__ = [
    "CdfError",
    "DistError",
    "Distribution",
    "Draws",
    "FAMILY_NAMES",
    "MAX_POINTS",
    "MAX_SIZE",
    "MAX_TIME",
    "PACKAGED",
    "SIZE",
    "TIME",
    "Workload",
    "did_you_mean",
    "generator",
    "parse",
    "parse_cdf_text",
    "poisson_gap",
    "seed_of",
]
