"""A distribution of sizes or times as a script writes it: parsing, its canonical text, its draws and mean.

Spelling (docs/workloads.md): ``family(arg,...)``, each argument ``name=value`` or,
first and in order, a bare value: ``exp(10K)`` is ``exp(mean=10K)``,
``lognormal(mean=10K,sigma=1)``, ``uniform(1K,10K)``, ``cdf(websearch,scale=0.01)``,
``cdf(file=sizes.cdf)``. Values take the quantity's units: sizes netperf's suffixes
(``10K`` = 10240 bytes, ``10k`` = 10000), times ``us``/``ms``/``s`` (a bare number
is ms, as everywhere in the language). Parentheses never occur in a size, so a
value is a distribution exactly when it has them.

Every :class:`Distribution` prints back as its canonical text (:attr:`Distribution.text`),
which parses to an equal one without reading any file (a CDF carries its points):
the text is what a flow spec carries to the agent.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

from netesto.vocab import parse_size, parse_time_ms
from netesto.workload import cdf as C
from netesto.workload.families import ALIASES, FAMILIES, Family

SIZE, TIME = "size", "time"
MAX_SIZE = 1 << 30  # the largest size a draw takes (the engine's server accepts requests and replies up to 1 GiB)
MAX_TIME = 3600.0  # s, the longest gap a draw takes
_CALL = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>.*)\)$", re.S)
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL = re.compile(r"[^A-Za-z0-9_.*+-]")
CDF_EXAMPLE = "cdf(websearch,scale=0.01) or cdf(file=sizes.cdf)"
FAMILY_NAMES = (*FAMILIES, "cdf")

# name -> (display name, text) of a CDF file, or LookupError saying why not (with a hint after " | ")
FileReader = Callable[[str], tuple[str, str]]


class DistError(ValueError):
    """A distribution that cannot be used: the message says what was expected, ``hint`` what might be meant."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def did_you_mean(word: str, choices: "list[str] | tuple[str, ...]") -> str:
    """A "did you mean" hint for ``word`` ('' when nothing is close)."""
    close = difflib.get_close_matches(word.lower(), [c.lower() for c in choices], n=2, cutoff=0.6)
    return "did you mean " + " or ".join(close) + "?" if close else ""


def _num(value: float) -> str:
    """A plain number as the canonical text writes it: exact, shortest."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e18 else repr(float(value))


def _fixed(value: float) -> str:
    """A size or a time in ms as the canonical text writes it: the size and time parsers take no exponent,
    so fixed point, to the nanosecond or a millionth of a byte."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


@dataclass(frozen=True)
class Distribution:
    """One distribution of sizes (bytes) or times (seconds); build it with :func:`parse`."""

    family: str  # const, uniform, exp, normal, lognormal, pareto, weibull, cdf
    kind: str  # SIZE or TIME
    params: tuple[tuple[str, float], ...] = ()
    points: C.Points = ()  # cdf: (value, cumulative probability), unscaled
    label: str = ""  # cdf: the packaged name or the file it came from

    @cached_property
    def p(self) -> dict[str, float]:
        return dict(self.params)

    @cached_property
    def _fam(self) -> Family | None:
        return FAMILIES.get(self.family)

    @cached_property
    def _range(self) -> tuple[float, float]:
        """The probabilities [F(min), F(max)] the uniform draw is mapped into (truncation)."""
        fam = self._fam
        if fam is None or not fam.bounded:
            return 0.0, 1.0
        p = self.p
        # (normal's min defaults to 0: sizes and times are never negative)
        return fam.cdf(p.get("min", 0.0), p), fam.cdf(p.get("max", math.inf), p)

    def quantile(self, u: float) -> float:
        """The value (bytes or seconds) a uniform draw ``u`` in [0, 1) becomes."""
        fam = self._fam
        if fam is None:
            return C.quantile(self.points, u) * self.p.get("scale", 1.0)
        ua, ub = self._range
        w = ua + (ub - ua) * u
        w = min(w, 1.0 - 2**-53)  # rounding must not reach the quantile's pole at 1
        x = fam.quantile(w, self.p)
        if fam.bounded:  # a rounding error must not step outside the bounds
            x = min(max(x, self.p.get("min", 0.0)), self.p.get("max", math.inf))
        return x

    def value(self, u: float) -> float:
        """A draw as the engine uses it: sizes whole bytes in 1..:data:`MAX_SIZE` (rounded half up),
        times seconds in 0..:data:`MAX_TIME`."""
        x = self.quantile(u)
        if self.kind == SIZE:
            return float(min(MAX_SIZE, max(1, math.floor(x + 0.5))))
        return min(MAX_TIME, max(0.0, x))

    @property
    def constant(self) -> bool:
        """True for ``const``: a draw needs no random number."""
        return self.family == "const"

    @cached_property
    def moments(self) -> tuple[float, float]:
        """(mean, variance) of :meth:`quantile`'s values (before rounding to whole bytes)."""
        fam = self._fam
        if fam is None:
            m, v = C.moments(self.points)
            s = self.p.get("scale", 1.0)
            return m * s, v * s * s
        p = self.p
        return fam.moments(p, p.get("min", 0.0) if fam.bounded else 0.0, p.get("max", math.inf))

    @property
    def mean(self) -> float:
        return self.moments[0]

    @property
    def sd(self) -> float:
        return math.sqrt(self.moments[1])

    def _value_text(self, name: str, value: float) -> str:
        fam = self._fam
        unit = next((q.unit for q in fam.params if q.name == name), "1") if fam is not None else "1"
        if unit == "value":
            return _fixed(value * 1000) + "ms" if self.kind == TIME else _fixed(value)
        return _num(value)

    @cached_property
    def text(self) -> str:
        """The canonical spelling: parses back to an equal distribution, reading no file."""
        args = [f"{k}={self._value_text(k, v)}" for k, v in self.params]
        if self.family == "cdf":
            pts = ";".join(f"{_num(v)}:{_num(p)}" for v, p in self.points)
            args = ([f"label={self.label}"] if self.label else []) + args + [f"points={pts}"]
        return f"{self.family}({','.join(args)})"

    @cached_property
    def short(self) -> str:
        """What to show for it: the canonical text, a CDF by its label and scale."""
        if self.family != "cdf":
            return self.text
        args = [self.label or f"{len(self.points)} points"] + [f"{k}={_num(v)}" for k, v in self.params]
        return f"cdf({','.join(args)})"


def _split_args(body: str) -> list[str]:
    return [] if not body.strip() else [a.strip() for a in body.split(",")]


def _value(raw: str, unit: str, kind: str, what: str) -> float:
    try:
        if unit == "1":
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(f"expected a finite number, got {raw!r}")
            return value
        if kind == SIZE:
            return float(parse_size(raw))  # whole bytes
        return round(parse_time_ms(raw), 6) / 1000.0  # to the nanosecond, as the canonical text writes it
    except ValueError as exc:
        if unit == "1":
            raise DistError(f"{what}: expected a number, got {raw!r}") from None
        raise DistError(f"{what}: {exc}, got {raw!r}") from None


def _named(fam: str, args: list[str], names: list[str], positional: int) -> dict[str, str]:
    """``name -> text`` of a call's arguments: bare values first (in parameter order), then ``name=value``."""
    out: dict[str, str] = {}
    named = False
    for i, arg in enumerate(args):
        key, eq, raw = arg.partition("=")
        if not eq:
            if named:
                raise DistError(f"{fam}: the value {arg!r} after a named argument needs its name",
                                f"{fam}'s parameters: {', '.join(names)}")
            if i >= positional:
                raise DistError(f"{fam}: too many values ({len(args)}); name them",
                                f"{fam}'s parameters: {', '.join(names)}")
            key, raw = names[i], arg
        else:
            named = True
            key = key.strip()
        if key in out:
            raise DistError(f"{fam}: {key} given twice")
        if not raw.strip():
            raise DistError(f"{fam}: {key}= has no value")
        out[key] = raw.strip()
    return out


def parse(text: str, kind: str, *, read_file: FileReader | None = None) -> Distribution:
    """The distribution ``text`` spells (see the module doc); a bare value is ``const``.

    ``kind`` is :data:`SIZE` or :data:`TIME`; ``read_file`` reads the files of
    ``cdf(file=...)`` (none given: such a CDF is refused). Raises :class:`DistError`.

    >>> parse("exp(10K)", SIZE).text, round(parse("lognormal(mean=10K,sigma=1)", SIZE).mean, 6)
    ('exp(mean=10240)', 10240.0)
    >>> parse("exp(mean=5ms)", TIME).text, parse("2ms", TIME).text
    ('exp(mean=5ms)', 'const(value=2ms)')
    """
    text = text.strip()
    m = _CALL.match(text)
    short = re.match(r"^([A-Za-z_]+):(.+)$", text)
    if m is None and short:
        raise DistError(f"{text!r}: a distribution is written name(value)", f"did you mean {short[1]}({short[2]})?")
    if m is None:
        word = text.split("(", 1)[0]
        if "(" in text:
            raise DistError(f"{word}(...: no closing ')'", "e.g. exp(mean=10K)")
        if _WORD.match(text):
            name = ALIASES.get(text.lower(), "cdf" if text.lower() == "cdf" else "")
            if name:
                example = FAMILIES[name].example if name in FAMILIES else CDF_EXAMPLE
                raise DistError(f"{text} needs its parameters", f"e.g. {example}")
            hint = f"did you mean cdf({text})?" if text.lower() in C.PACKAGED else did_you_mean(text, list(ALIASES) + ["cdf"])
            raise DistError(f"{text!r} is neither a {'size' if kind == SIZE else 'time'} nor a distribution",
                            hint or "distributions: " + ", ".join(FAMILY_NAMES))
        if kind == SIZE:
            try:
                return _family("const", kind, ["value=" + text])
            except DistError:
                raise DistError(f"expected a size like 10K or a distribution like exp(mean=10K), got {text!r}",
                                "distributions: " + ", ".join(FAMILY_NAMES)) from None
        return _family("const", kind, ["value=" + text])
    name = m.group("name").lower()
    args = _split_args(m.group("args"))
    if name == "cdf":
        return _cdf(args, kind, read_file)
    family = ALIASES.get(name)
    if family is None:
        raise DistError(f"unknown distribution {m.group('name')!r}",
                        did_you_mean(name, list(ALIASES) + ["cdf"]) or "distributions: " + ", ".join(FAMILY_NAMES))
    return _family(family, kind, args)


def _family(name: str, kind: str, args: list[str]) -> Distribution:
    fam = FAMILIES[name]
    names = fam.names()
    alternatives = {"pareto": ("mean", "min"), "weibull": ("mean", "scale")}
    alt = alternatives.get(name)
    given = _named(name, args, names, fam.positional)
    for key in given:
        if key not in names and not (alt and key == alt[0]):
            raise DistError(f"{name} has no parameter {key!r}",
                            did_you_mean(key, names) or f"{name}'s parameters: {', '.join(names)}")
    units = {q.name: q.unit for q in fam.params}
    p = {k: _value(v, units.get(k, "value"), kind, f"{name} {k}") for k, v in given.items()}
    if alt and alt[0] in p:  # pareto(mean=..), weibull(mean=..): the family's own parameter from the mean
        if alt[1] in p:
            raise DistError(f"{name}: give {alt[0]}= or {alt[1]}=, not both")
        shape = p.get("shape")
        if shape is None or shape <= 0:
            raise DistError(f"{name} needs shape= (above 0)", f"e.g. {fam.example}")
        if name == "pareto":
            if shape <= 1:
                raise DistError(f"pareto: a mean= needs shape above 1 (shape {shape:g} has no mean)",
                                "give min= instead")
            derived = p.pop(alt[0]) * (shape - 1) / shape
        else:
            derived = p.pop(alt[0]) / math.gamma(1 + 1 / shape)
        # in the units' own steps, as the canonical text writes them: whole bytes, nanoseconds
        p[alt[1]] = float(max(1, round(derived))) if kind == SIZE else round(derived * 1e3, 6) / 1e3
    missing = [q.name for q in fam.params if q.required and q.name not in p]
    if missing:
        raise DistError(f"{name} needs {', '.join(m + '=' for m in missing)}", f"e.g. {fam.example}")
    _check(name, p, kind)
    params = tuple((q.name, p[q.name]) for q in fam.params
                   if q.name in p and (q.required or p[q.name] != q.default))
    return Distribution(name, kind, params)


def _check(name: str, p: dict[str, float], kind: str) -> None:
    """Refuse parameters a draw cannot come from (DistError naming the parameter)."""
    for key, value in p.items():
        if value < 0 and not (name == "normal" and key == "mean"):
            raise DistError(f"{name} {key}={_num(value)} is negative")
    positive = {"exp": ("mean",), "normal": ("sd",), "lognormal": ("mean", "sigma"),
                "pareto": ("min", "shape"), "weibull": ("scale", "shape")}.get(name, ())
    for key in positive:
        if p[key] <= 0:
            raise DistError(f"{name} {key} must be above 0, got {_num(p[key])}")
    if name == "uniform" and p["max"] < p["min"]:
        raise DistError(f"uniform: max {_num(p['max'])} is below min {_num(p['min'])}")
    if name in ("lognormal", "weibull") and not 0.05 <= p.get("sigma", p.get("shape", 1.0)) <= 20:
        key = "sigma" if name == "lognormal" else "shape"
        raise DistError(f"{name} {key}={_num(p[key])} is outside 0.05..20")
    fam = FAMILIES[name]
    if fam.bounded:
        lo, hi = p.get("min", 0.0), p.get("max", math.inf)
        if hi <= lo:
            raise DistError(f"{name}: max {_num(hi)} is not above min {_num(lo)}")
        mass = fam.cdf(hi, p) - fam.cdf(lo, p)
        if not mass > 1e-9:
            raise DistError(f"{name}: no probability between min {_num(lo)} and max {_num(hi)}",
                            "bounds cut the distribution; move them toward its mean")
    if name == "pareto" and p["shape"] <= 1 and "max" not in p:
        raise DistError(f"pareto with shape {_num(p['shape'])} has no mean (it is infinite)",
                        "bound it with max=, or take a shape above 1")
    limit = MAX_SIZE if kind == SIZE else MAX_TIME
    for key in ("value", "mean", "min", "scale"):
        if key in p and p[key] > limit:
            what = "1 GiB" if kind == SIZE else f"{MAX_TIME:g} s"
            raise DistError(f"{name} {key} is above {what}, the most a draw can be")


def _cdf(args: list[str], kind: str, read_file: FileReader | None) -> Distribution:
    if kind != SIZE:
        raise DistError("cdf(...) draws sizes; a time takes one of " + ", ".join(FAMILIES))
    names = ["name", "file", "scale", "points", "label"]
    given = _named("cdf", args, names, 1)
    for key in given:
        if key not in names:
            raise DistError(f"cdf has no parameter {key!r}",
                            did_you_mean(key, names) or "cdf's parameters: name (or file=), scale")
    sources = [k for k in ("name", "file", "points") if k in given]
    if len(sources) != 1:
        raise DistError("cdf needs one of a packaged name, file= or points=" if not sources
                        else f"cdf: give one of {' or '.join(sources)}, not both",
                        f"e.g. {CDF_EXAMPLE}; packaged: {', '.join(C.PACKAGED)}")
    params: tuple[tuple[str, float], ...] = ()
    if "scale" in given:
        scale = _value(given["scale"], "1", kind, "cdf scale")
        if not scale > 0:
            raise DistError(f"cdf scale must be above 0, got {given['scale']}")
        if scale != 1:
            params = (("scale", scale),)
    label = given.get("label", "")
    try:
        if "points" in given:
            points = C.parse_points(given["points"])
        elif "name" in given and given["name"].lower() in C.PACKAGED:
            label = given["name"].lower()
            points = C.packaged(label)
        else:
            points, label = _cdf_file(given.get("file") or given["name"], "file" in given, read_file)
    except C.CdfError as exc:
        raise DistError(str(exc)) from None
    if points[-1][0] * dict(params).get("scale", 1.0) > MAX_SIZE:
        raise DistError(f"cdf: its largest value ({_num(points[-1][0])} bytes, scaled) is above 1 GiB",
                        "give a scale= that brings it down")
    return Distribution("cdf", kind, params, points, _LABEL.sub("_", label)[:40])


def _cdf_file(name: str, explicit: bool, read_file: FileReader | None) -> tuple[C.Points, str]:
    try:
        if read_file is None:
            raise LookupError(f"no file can be read here ({name})")
        shown, text = read_file(name)
    except LookupError as exc:
        message, _, hint = str(exc.args[0] if exc.args else exc).partition(" | ")
        if not explicit:
            message = f"no packaged CDF named {name!r} and {message}"
            hint = did_you_mean(name, C.PACKAGED) or hint or f"packaged: {', '.join(C.PACKAGED)}"
        raise DistError(f"cdf: {message}", hint or "give the CDF's points=") from None
    return C.parse_cdf_text(text, shown), os.path.basename(name)


__all__ = ["CDF_EXAMPLE", "DistError", "Distribution", "FAMILY_NAMES", "FileReader", "MAX_SIZE", "MAX_TIME", "SIZE",
           "TIME", "did_you_mean", "parse"]
