"""The distribution families: their parameters, quantile functions and (truncated) means and variances.

Every draw is one uniform ``u`` in [0, 1) put through a family's quantile function
(inverse transform sampling), so a draw is a documented function of ``u``. A family
with bounds (``min=``/``max=``) is truncated by mapping ``u`` into [F(min), F(max)]
first: exact, with no rejection loop. Parameters describe the untruncated
distribution; the means and variances here are those of the truncated one.

Stdlib only: the engine draws on agent hosts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable, Mapping

_N01 = NormalDist()
_TINY = 1e-300
_NUMERIC_STEPS = 20000  # midpoint rule over u for the one family without a closed form (truncated Weibull)

Params = Mapping[str, float]


@dataclass(frozen=True)
class Param:
    """One parameter: ``unit`` "value" (bytes for sizes, seconds for times) or "1" (a plain number)."""

    name: str
    unit: str = "value"
    required: bool = True
    default: float = math.nan


@dataclass(frozen=True)
class Family:
    """A named family: its parameters (positional ones first, in order), an example, its functions."""

    name: str
    params: tuple[Param, ...]
    positional: int  # how many parameters may be given without their names
    example: str
    quantile: Callable[[float, Params], float]  # u in (0, 1) -> value (untruncated)
    cdf: Callable[[float, Params], float]
    moments: Callable[[Params, float, float], tuple[float, float]]  # (mean, variance) truncated to [lo, hi]
    bounded: bool = False  # takes min=/max= truncation bounds
    aliases: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return [p.name for p in self.params]


def _phi(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) if math.isfinite(z) else 0.0


def _big_phi(z: float) -> float:
    return 0.0 if z == -math.inf else 1.0 if z == math.inf else _N01.cdf(z)


def _z(u: float) -> float:
    """The standard normal quantile of ``u``, kept inside (0, 1)."""
    return _N01.inv_cdf(min(max(u, _TINY), 1.0 - 2**-53))


def numeric_moments(quantile: Callable[[float], float], ua: float, ub: float) -> tuple[float, float]:
    """(mean, variance) of ``quantile(u)`` for u uniform on [ua, ub] (midpoint rule; bounded values only)."""
    n = _NUMERIC_STEPS
    h = (ub - ua) / n
    s1 = s2 = 0.0
    for i in range(n):
        x = quantile(ua + (i + 0.5) * h)
        s1 += x
        s2 += x * x
    mean = s1 / n
    return mean, max(0.0, s2 / n - mean * mean)


# const, uniform


def _const_moments(p: Params, lo: float, hi: float) -> tuple[float, float]:
    return p["value"], 0.0


def _uniform_moments(p: Params, lo: float, hi: float) -> tuple[float, float]:
    a, b = p["min"], p["max"]
    return (a + b) / 2, (b - a) ** 2 / 12


# exponential: F(x) = 1 - exp(-x/m)


def _exp_moments(p: Params, lo: float, hi: float) -> tuple[float, float]:
    m = p["mean"]
    if hi == math.inf:  # memoryless: lo + Exp(m)
        return lo + m, m * m
    d = hi - lo
    e = math.exp(-d / m)
    return lo + m - d * e / (1 - e), m * m - d * d * e / (1 - e) ** 2


# normal (always truncated: sizes and times are never negative; min defaults to 0)


def _normal_moments(p: Params, lo: float, hi: float) -> tuple[float, float]:
    mu, sd = p["mean"], p["sd"]
    a, b = (lo - mu) / sd, (hi - mu) / sd
    z = _big_phi(b) - _big_phi(a)
    pa, pb = _phi(a), _phi(b)
    ta = a * pa if math.isfinite(a) else 0.0
    tb = b * pb if math.isfinite(b) else 0.0
    shift = (pa - pb) / z
    return mu + sd * shift, sd * sd * (1 + (ta - tb) / z - shift * shift)


# lognormal by its own mean and the log's sd: mu = ln(mean) - sigma^2 / 2


def _ln_mu(p: Params) -> float:
    return math.log(p["mean"]) - p["sigma"] ** 2 / 2


def _lognormal_moments(p: Params, lo: float, hi: float) -> tuple[float, float]:
    mu, s = _ln_mu(p), p["sigma"]
    la = math.log(lo) if lo > 0 else -math.inf
    lb = math.log(hi) if hi < math.inf else math.inf

    def part(k: int) -> float:  # E[X^k; lo < X < hi]
        return math.exp(k * mu + k * k * s * s / 2) * (_big_phi((lb - mu - k * s * s) / s)
                                                        - _big_phi((la - mu - k * s * s) / s))

    z = _big_phi((lb - mu) / s) - _big_phi((la - mu) / s)
    mean = part(1) / z
    return mean, max(0.0, part(2) / z - mean * mean)


# Pareto (type I): F(x) = 1 - (xm/x)^a for x >= xm; bounded by max=


def _pareto_moments(p: Params, lo: float, hi: float) -> tuple[float, float]:
    xm, a = p["min"], p["shape"]
    if hi == math.inf:
        mean = a * xm / (a - 1) if a > 1 else math.inf
        var = xm * xm * a / ((a - 1) ** 2 * (a - 2)) if a > 2 else math.inf
        return mean, var

    def part(k: int) -> float:  # E[X^k; X < hi]
        if abs(k - a) < 1e-12:
            return a * xm**a * math.log(hi / xm)
        return a * xm**a * (hi ** (k - a) - xm ** (k - a)) / (k - a)

    z = 1 - (xm / hi) ** a
    mean = part(1) / z
    return mean, max(0.0, part(2) / z - mean * mean)


# Weibull: F(x) = 1 - exp(-(x/scale)^shape)


def _weibull_moments(p: Params, lo: float, hi: float) -> tuple[float, float]:
    lam, k = p["scale"], p["shape"]
    if lo <= 0 and hi == math.inf:
        g1, g2 = math.gamma(1 + 1 / k), math.gamma(1 + 2 / k)
        return lam * g1, lam * lam * (g2 - g1 * g1)
    return numeric_moments(lambda u: _weibull_q(u, p), _weibull_cdf(lo, p), _weibull_cdf(hi, p))


def _weibull_q(u: float, p: Params) -> float:
    return p["scale"] * (-math.log1p(-u)) ** (1 / p["shape"])


def _weibull_cdf(x: float, p: Params) -> float:
    return 1.0 if x == math.inf else -math.expm1(-((max(x, 0.0) / p["scale"]) ** p["shape"]))


_BOUNDS = (Param("min", required=False, default=0.0), Param("max", required=False, default=math.inf))

FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("const", (Param("value"),), 1, "const(10K)",
           lambda u, p: p["value"], lambda x, p: 1.0 if x >= p["value"] else 0.0, _const_moments,
           aliases=("constant",)),
    Family("uniform", (Param("min"), Param("max")), 2, "uniform(min=1K,max=10K)",
           lambda u, p: p["min"] + (p["max"] - p["min"]) * u,
           lambda x, p: min(1.0, max(0.0, (x - p["min"]) / (p["max"] - p["min"]))) if p["max"] > p["min"]
           else float(x >= p["min"]), _uniform_moments),
    Family("exp", (Param("mean"), *_BOUNDS), 1, "exp(mean=10K)",
           lambda u, p: -p["mean"] * math.log1p(-u),
           lambda x, p: 1.0 if x == math.inf else -math.expm1(-max(x, 0.0) / p["mean"]), _exp_moments,
           bounded=True, aliases=("exponential",)),
    Family("normal", (Param("mean"), Param("sd"), *_BOUNDS), 2, "normal(mean=10K,sd=2K)",
           lambda u, p: p["mean"] + p["sd"] * _z(u),
           lambda x, p: _big_phi((x - p["mean"]) / p["sd"]), _normal_moments, bounded=True),
    Family("lognormal", (Param("mean"), Param("sigma", "1"), *_BOUNDS), 2, "lognormal(mean=10K,sigma=1)",
           lambda u, p: math.exp(_ln_mu(p) + p["sigma"] * _z(u)),
           lambda x, p: 0.0 if x <= 0 else _big_phi((math.log(x) - _ln_mu(p)) / p["sigma"]), _lognormal_moments,
           bounded=True),
    Family("pareto", (Param("min"), Param("shape", "1"), Param("max", required=False, default=math.inf)), 2,
           "pareto(min=1K,shape=1.5,max=10M)",
           lambda u, p: p["min"] * (1.0 - u) ** (-1.0 / p["shape"]),
           lambda x, p: 0.0 if x < p["min"] else 1.0 if x == math.inf else 1.0 - (p["min"] / x) ** p["shape"],
           _pareto_moments, bounded=True),
    Family("weibull", (Param("scale"), Param("shape", "1"), *_BOUNDS), 2, "weibull(scale=10K,shape=0.7)",
           _weibull_q, _weibull_cdf, _weibull_moments, bounded=True),
)}
ALIASES: dict[str, str] = {a: f.name for f in FAMILIES.values() for a in (f.name, *f.aliases)}

__all__ = ["ALIASES", "FAMILIES", "Family", "Param", "Params", "numeric_moments"]
