"""Changing links: the parameters a bottleneck schedule sets, their ranges, and named shapes of time.

A *schedule* is a list of :class:`Step`: at ``at`` seconds after the flows
start, ``param`` takes ``value`` (in the parameter's unit: bit/s, one-way
ms, %, bytes). The script's ``SET_LINK`` writes one as plain values with
``at=``, or as a named *shape*; a sweep passes a shape as one word::

    step(50mbit,10mbit,at=2)            50 Mbit/s, then 10 Mbit/s from 2 s
    steps(50mbit,10mbit@2,30mbit@5)     a value, then one at each time
    ramp(50mbit,10mbit,at=2,to=4)       linear from 2 s to 4 s, a step each every= s (0.1)
    square(10mbit,2mbit,period=1,until=8)   the two values by turns, half a period each

The colon spelling ``step:50mbit:10mbit:at=2`` is the same shape without
parentheses or commas (it passes through a sweep's ``-p`` lists and a
``%%netesto`` line as one word). Every layer reads these words here: the
script checks them at plan time, the controller expands them, a notebook
can draw what a shape asks for (:func:`value_at`).

>>> [(s.at, s.value) for s in parse_shape("rate", "step(50mbit,10mbit,at=2)")]
[(0.0, 50000000.0), (2.0, 10000000.0)]
>>> [(s.at, s.value) for s in parse_shape("delay", "ramp:10:30:at=1:to=2:every=0.5")]
[(0.0, 10.0), (1.5, 20.0), (2.0, 30.0)]
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from netesto.vocab import parse_rate, parse_size, parse_time_ms

MAX_STEPS = 10_000  # steps one schedule of one link may have (a ramp at 10 ms for 100 s)
MIN_EVERY = 0.01  # s: the finest ramp granularity (each step is one tc call or one control message)
DEFAULT_EVERY = 0.1  # s
MAX_AT = 7 * 86400.0  # s: as long as a WAIT may be
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)(s|ms)?$")
_CALL = re.compile(r"^([A-Za-z_]\w*)\((.*)\)$")


def _loss(text: str) -> float:
    raw = text[:-1] if text.endswith("%") else text
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"expected a loss in percent like 1 or 0.5%, got {text!r}") from None
    return value


@dataclass(frozen=True)
class Param:
    """A link parameter: its unit, its range, how its text reads and prints."""

    name: str
    unit: str
    low: float
    high: float
    parse: Callable[[str], float]
    what: str  # what the text may look like, for errors

    def value(self, text: str) -> float:
        """``text`` as this parameter's value, ValueError naming the range when it is out of it."""
        try:
            value = float(self.parse(text))
        except ValueError as exc:
            raise ValueError(f"{self.name}: {exc}; expected {self.what}") from None
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise ValueError(f"{self.name} {text} is outside {text_of(self.name, self.low)}.."
                             f"{text_of(self.name, self.high)}")
        return value


PARAMS: dict[str, Param] = {p.name: p for p in (
    Param("rate", "bit/s", 10_000, 10**10, lambda s: float(parse_rate(s)), "a rate like 10mbit or 1gbit"),
    Param("delay", "ms", 0.0, 10_000.0, parse_time_ms, "a one-way delay in ms like 20 or 20ms"),
    Param("jitter", "ms", 0.0, 10_000.0, parse_time_ms, "a jitter in ms like 2 or 2ms"),
    Param("loss", "%", 0.0, 100.0, _loss, "a loss in percent like 1 or 0.5%"),
    Param("buffer", "bytes", 3000, 2**31 - 1, lambda s: float(parse_size(s)), "a size like 256k or 1M"),
)}


@dataclass(frozen=True)
class Step:
    """At ``at`` seconds after the flows start, ``param`` becomes ``value`` (the parameter's unit)."""

    at: float
    param: str
    value: float

    def text(self) -> str:
        return f"{self.param}={text_of(self.param, self.value)}@{self.at:g}"


def text_of(param: str, value: float) -> str:
    """A value as a plan or a plot label shows it.

    >>> text_of("rate", 1.5e7), text_of("delay", 20.0), text_of("loss", 0.5), text_of("buffer", 250000)
    ('15mbit', '20ms', '0.5%', '250000B')
    """
    if param == "rate":
        for scale, unit in ((1e9, "gbit"), (1e6, "mbit"), (1e3, "kbit")):
            if value >= scale:
                return f"{value / scale:g}{unit}"
        return f"{value:g}bit"
    suffix = {"delay": "ms", "jitter": "ms", "loss": "%", "buffer": "B"}.get(param, "")
    return f"{value:g}{suffix}"


def seconds(text: str) -> float:
    """A schedule time: seconds (``2``, ``2s``, ``500ms``), in 0..7 days.

    >>> seconds("2"), seconds("1.5s"), seconds("250ms")
    (2.0, 1.5, 0.25)
    """
    m = _SECONDS.match(text)
    if m is None or len(text) > 40:
        raise ValueError(f"expected a time in seconds like 2, 1.5s or 250ms, got {text!r}")
    value = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    if value > MAX_AT:
        raise ValueError(f"time {text} is after the longest schedule of {MAX_AT:g} s")
    return value


def suggest(word: str, choices: Sequence[str]) -> str:
    """A "did you mean" for ``word`` among ``choices`` ('' if nothing is close)."""
    close = difflib.get_close_matches(word, list(choices), n=2, cutoff=0.6)
    return f"did you mean {' or '.join(close)}?" if close else ""


def check_param(name: str) -> Param:
    """The parameter ``name``, ValueError with a "did you mean" for an unknown one."""
    param = PARAMS.get(name)
    if param is None:
        hint = suggest(name, list(PARAMS))
        raise ValueError(f"unknown link parameter {name!r}" + (f"; {hint}" if hint else "")
                         + f" (parameters: {', '.join(PARAMS)})")
    return param


class _Args:
    """A shape's positional values and ``key=value`` options, each read once."""

    def __init__(self, shape: str, words: list[str]) -> None:
        self.shape = shape
        self.positional: list[str] = []
        self.options: dict[str, str] = {}
        for word in words:
            key, eq, value = word.partition("=")
            if eq:
                if key in self.options:
                    raise ValueError(f"{shape}: {key}= given twice")
                self.options[key] = value
            elif self.options:
                raise ValueError(f"{shape}: value {word!r} after the options (write the values first)")
            else:
                self.positional.append(word)

    def values(self, n: int) -> list[str]:
        if len(self.positional) != n:
            raise ValueError(f"{self.shape} takes {n} values, got {len(self.positional)}: {', '.join(self.positional)}")
        return self.positional

    def time(self, key: str, default: float | None = None) -> float:
        if key not in self.options:
            if default is None:
                raise ValueError(f"{self.shape}: {key}= is required")
            return default
        return seconds(self.options.pop(key))

    def done(self, allowed: Sequence[str]) -> None:
        for key in self.options:
            hint = suggest(key, allowed)
            raise ValueError(f"{self.shape}: unknown option {key}=" + (f"; {hint}" if hint else "")
                             + f" ({self.shape} takes {', '.join(k + '=' for k in allowed)})")


def _step(p: Param, a: _Args) -> list[tuple[float, float]]:
    first, then = a.values(2)
    at = a.time("at")
    a.done(("at",))
    return [(0.0, p.value(first)), (at, p.value(then))]


def _steps(p: Param, a: _Args) -> list[tuple[float, float]]:
    a.done(())
    if not a.positional:
        raise ValueError("steps needs at least one value")
    out = []
    for i, word in enumerate(a.positional):
        value, at_sign, when = word.partition("@")
        if not at_sign and i:
            raise ValueError(f"steps: {word!r} needs its time, e.g. {word}@2")
        out.append((seconds(when) if at_sign else 0.0, p.value(value)))
    return out


def _ramp(p: Param, a: _Args) -> list[tuple[float, float]]:
    first, last = (p.value(v) for v in a.values(2))
    start, end, every = a.time("at"), a.time("to"), a.time("every", DEFAULT_EVERY)
    a.done(("at", "to", "every"))
    if end <= start:
        raise ValueError(f"ramp: to={end:g} must come after at={start:g}")
    if every < MIN_EVERY:
        raise ValueError(f"ramp: every={every:g} is finer than {MIN_EVERY:g} s (each step is a tc call)")
    n = max(1, math.ceil((end - start) / every - 1e-9))
    if n > MAX_STEPS:
        raise ValueError(f"ramp: {n} steps of {every:g} s is more than {MAX_STEPS}: give a larger every=")
    out = [(0.0, first)]
    for k in range(1, n + 1):
        t = min(end, start + k * every)
        out.append((round(t, 9), first + (last - first) * (t - start) / (end - start)))
    return out


def _square(p: Param, a: _Args) -> list[tuple[float, float]]:
    low, high = (p.value(v) for v in a.values(2))
    period, until = a.time("period"), a.time("until")
    a.done(("period", "until"))
    if period < 2 * MIN_EVERY:
        raise ValueError(f"square: period={period:g} is shorter than {2 * MIN_EVERY:g} s")
    n = math.ceil(until / (period / 2) - 1e-9)
    if n > MAX_STEPS:
        raise ValueError(f"square: {n} half periods is more than {MAX_STEPS}: give a longer period= or an earlier until=")
    out = [(round(k * period / 2, 9), high if k % 2 else low) for k in range(n)]
    if n % 2 == 0 and n:  # ends on the second value: back to the first at until
        out.append((until, low))
    return out


SHAPES: dict[str, Callable[[Param, _Args], list[tuple[float, float]]]] = {
    "step": _step, "steps": _steps, "ramp": _ramp, "square": _square}


def split_shape(text: str) -> tuple[str, list[str]] | None:
    """``(name, words)`` of a shape in either spelling, None for a plain value.

    >>> split_shape("step(1,2,at=3)"), split_shape("step:1:2:at=3"), split_shape("10mbit")
    (('step', ['1', '2', 'at=3']), ('step', ['1', '2', 'at=3']), None)
    """
    m = _CALL.match(text)
    if m:
        inner = m.group(2)
        return m.group(1), [w for w in inner.split(",")] if inner else []
    if "(" in text or ")" in text:
        raise ValueError(f"{text!r}: a shape is written name(value,...,option=...), e.g. step(50mbit,10mbit,at=2)")
    if ":" in text:
        name, *words = text.split(":")
        return name, words
    return None


def parse_shape(param: str, text: str, at: float = 0.0) -> tuple[Step, ...]:
    """The steps ``text`` (a value or a shape) asks of ``param``; a plain value is one step at ``at``.

    ValueError says what is wrong: an unknown shape or option ("did you mean"), a value out of
    range, times that go backwards or repeat, too many steps.
    """
    p = check_param(param)
    if len(text) > 4096:
        raise ValueError(f"{param}: a shape of {len(text)} characters is too long")
    shape = split_shape(text)
    if shape is None:
        return (Step(at, param, p.value(text)),)
    name, words = shape
    build = SHAPES.get(name)
    if build is None:
        hint = suggest(name, list(SHAPES))
        raise ValueError(f"unknown shape {name!r}" + (f"; {hint}" if hint else "") + f" (shapes: {', '.join(SHAPES)})")
    if any(w == "" for w in words):
        raise ValueError(f"{name}: an empty value in {text!r}")
    if at:
        raise ValueError(f"{name}: a shape carries its own times; at= is for plain values")
    pairs = build(p, _Args(name, words))
    check_forward([t for t, _ in pairs], f"{param}={text}")
    return tuple(Step(t, param, v) for t, v in pairs)


def check_forward(times: Sequence[float], what: str) -> None:
    """ValueError unless ``times`` strictly increase (a schedule's times go forward)."""
    for before, after in zip(times, times[1:]):
        if after <= before:
            word = "repeats" if after == before else "goes back to"
            raise ValueError(f"{what}: time {word} {after:g} s after {before:g} s (a schedule's times go forward)")


def value_at(steps: Sequence[Step], param: str, t: float, default: float = math.nan) -> float:
    """What ``steps`` give ``param`` at ``t`` s (``default`` before its first step).

    >>> s = parse_shape("rate", "step(50mbit,10mbit,at=2)")
    >>> value_at(s, "rate", 1.0), value_at(s, "rate", 3.0)
    (50000000.0, 10000000.0)
    """
    value = default
    for s in sorted((s for s in steps if s.param == param), key=lambda s: s.at):
        if s.at > t:
            break
        value = s.value
    return value


__all__ = [
    "DEFAULT_EVERY",
    "MAX_STEPS",
    "MIN_EVERY",
    "PARAMS",
    "Param",
    "SHAPES",
    "Step",
    "check_forward",
    "check_param",
    "parse_shape",
    "seconds",
    "split_shape",
    "suggest",
    "text_of",
    "value_at",
]
