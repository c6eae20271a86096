"""Empirical CDFs of sizes: the packaged published shapes, a user's file, their checks and their draws.

A CDF is a list of ``(value, cumulative probability)`` points, values and
probabilities never going down, the last probability 1. A draw interpolates
linearly between the points (as ns-3's EmpiricalRandomVariable and the HPCC and
pFabric traffic generators do); a first point with a probability above 0 is a
point mass at its value. In a file, one point a line: the value (bytes, with the
size suffixes: ``10K``) and its probability, separated by blanks or a comma; a
line of three columns (``value index probability``, the empirical-traffic-gen
format) takes the first and the last; ``#`` starts a comment.
"""

from __future__ import annotations

import math
import re
from importlib import resources

from netesto.vocab import parse_number, parse_size

MAX_POINTS = 256  # a CDF travels inside the flow's hello (16 KiB): resample a finer one
MAX_FILE_BYTES = 1 << 20
PACKAGED = ("websearch", "datamining")  # netesto/data/<name>.cdf
_SPLIT = re.compile(r"[\s,]+")

Points = tuple[tuple[float, float], ...]


class CdfError(ValueError):
    """A CDF that cannot be used: the message names where (``file:line``)."""


def check_points(points: list[tuple[float, float, str]]) -> Points:
    """The points of a CDF (``(value, probability, where)``, ``where`` naming each for messages), checked."""
    if not points:
        raise CdfError("no points: a CDF needs at least one 'value probability' line")
    if len(points) > MAX_POINTS:
        raise CdfError(f"{len(points)} points: at most {MAX_POINTS} (resample the CDF more coarsely)")
    prev_v, prev_p = -math.inf, 0.0
    for value, prob, where in points:
        if value < 0:
            raise CdfError(f"{where}: value {value:g} is negative")
        if not 0 <= prob <= 1:
            hint = " (percentages? give probabilities 0..1)" if 1 < prob <= 100 else ""
            raise CdfError(f"{where}: probability {prob:g} is not in 0..1{hint}")
        if value < prev_v:
            raise CdfError(f"{where}: value {value:g} after {prev_v:g}: a CDF's values never go down")
        if prob < prev_p:
            raise CdfError(f"{where}: probability {prob:g} after {prev_p:g}: a CDF never goes down")
        prev_v, prev_p = value, prob
    last = points[-1][1]
    if abs(last - 1.0) > 1e-9:
        hint = " (percentages? give probabilities 0..1)" if last == 100 else ""
        raise CdfError(f"{points[-1][2]}: the last probability is {last:g}, not 1: a CDF ends at 1{hint}")
    return tuple((v, p) for v, p, _ in points[:-1]) + ((points[-1][0], 1.0),)


def parse_cdf_text(text: str, source: str) -> Points:
    """The points of a CDF file's ``text`` (``source`` names it in messages: ``my.cdf:4: ...``)."""
    points: list[tuple[float, float, str]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{lineno}"
        fields = [f for f in _SPLIT.split(line) if f]
        if len(fields) not in (2, 3):
            raise CdfError(f"{where}: expected 'value probability', got {raw.strip()[:60]!r}")
        try:
            value = float(parse_size(fields[0])) if fields[0][-1:].isalpha() else parse_number(fields[0])
            prob = parse_number(fields[-1])
        except ValueError as exc:
            raise CdfError(f"{where}: {exc} (the line: {raw.strip()[:60]!r})") from None
        points.append((value, prob, where))
    return check_points(points)


def parse_points(text: str) -> Points:
    """Inline points ``v:p;v:p;...`` (a distribution's ``points=``; the canonical spelling)."""
    points: list[tuple[float, float, str]] = []
    for i, item in enumerate(text.split(";"), start=1):
        value, colon, prob = item.partition(":")
        if not colon:
            raise CdfError(f"point {i}: expected value:probability, got {item[:40]!r}")
        try:
            v = float(parse_size(value)) if value[-1:].isalpha() else parse_number(value)
            points.append((v, parse_number(prob), f"point {i}"))
        except ValueError as exc:
            raise CdfError(f"point {i}: {exc}") from None
    return check_points(points)


def packaged(name: str) -> Points:
    """The points of a packaged CDF (:data:`PACKAGED`)."""
    text = resources.files("netesto").joinpath("data", f"{name}.cdf").read_text(encoding="utf-8")
    return parse_cdf_text(text, f"{name}.cdf")


def quantile(points: Points, u: float) -> float:
    """The value at probability ``u`` (linear between points; the first point's mass below its probability)."""
    prev_v, prev_p = points[0]
    if u < prev_p:
        return prev_v
    for v, p in points[1:]:
        if u < p:
            return prev_v + (v - prev_v) * (u - prev_p) / (p - prev_p)
        prev_v, prev_p = v, p
    return points[-1][0]


def cdf_at(points: Points, x: float) -> float:
    """P(X <= x) of the interpolated CDF."""
    if x < points[0][0]:
        return 0.0
    prev_v, prev_p = points[0]
    for v, p in points[1:]:
        if x < v:
            return prev_p + (p - prev_p) * (x - prev_v) / (v - prev_v)
        prev_v, prev_p = v, p
    return 1.0


def moments(points: Points) -> tuple[float, float]:
    """(mean, variance) of the interpolated CDF: uniform within each segment, the first point's mass at it."""
    v0, p0 = points[0]
    m1, m2 = p0 * v0, p0 * v0 * v0
    prev_v, prev_p = v0, p0
    for v, p in points[1:]:
        w = p - prev_p
        m1 += w * (prev_v + v) / 2
        m2 += w * (prev_v * prev_v + prev_v * v + v * v) / 3
        prev_v, prev_p = v, p
    return m1, max(0.0, m2 - m1 * m1)


__all__ = ["CdfError", "MAX_POINTS", "PACKAGED", "Points", "cdf_at", "check_points", "moments", "packaged",
           "parse_cdf_text", "parse_points", "quantile"]
