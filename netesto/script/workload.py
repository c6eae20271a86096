"""DO_CLIENT's workload arguments: drawn sizes (``req=``, ``reply=``), ``gap=``, ``arrivals=``, ``load=``,
``bottleneck=``, ``seed=`` (docs/workloads.md), checked where they stand.

A size with parentheses is a distribution (``req=exp(mean=10K)``); a word that
names one without them (``req=lognormal``), an unknown family, a CDF file that is
missing, unreadable or not a CDF, a load outside (0, 1] and a seed that is not a
whole number are refused at their column, with a "did you mean" where one helps.
CDF files are read through the interpreter's loader, from the directories SOURCE
reads (the script's folder first).
"""

from __future__ import annotations

import re
from typing import Any

from netesto.protocol.flowspec import MAX_SEED, WORKLOAD_TESTS
from netesto.script import validate as V
from netesto.script.located import Args
from netesto.script.parser import suggest
from netesto.workload import SIZE, TIME, DistError, Distribution
from netesto.workload import parse as parse_dist

_SEED = re.compile(r"^\d{1,19}$")
OPEN_ONLY = ("arrivals", "load")  # open-loop arguments: TCP_CRR only


_STREAM_WORDS = frozenset({"S", "s", "STREAM", "stream"})  # req= of a stream test


def is_drawn(raw: str) -> bool:
    """Whether a size argument's text asks for a distribution (a size is digits and a suffix; a
    word is the name of one, or a mistake the distribution parser names)."""
    return raw not in _STREAM_WORDS and ("(" in raw or bool(re.match(r"^[A-Za-z_]{2,}(:|$)", raw)))


def _reader(args: Args) -> Any:
    """``name -> (shown, text)`` of a CDF file, through the interpreter's loader (LookupError with a hint)."""
    loader = getattr(args.ev, "loader", None)
    base = args.frame.base_dir

    def read(name: str) -> tuple[str, str]:
        if loader is None:
            raise LookupError(f"file {name!r} cannot be read here")
        try:
            _, shown, text = loader.load(name, base)
        except LookupError as exc:
            hint = suggest(name, loader.names(base))
            raise LookupError(f"{exc.args[0] if exc.args else exc}" + (f" | {hint}" if hint else "")) from None
        return shown, text

    return read


def distribution(args: Args, key: str, kind: str) -> Distribution:
    """``key``'s value as a distribution (a bare value is ``const``), refused at its column."""
    raw = args.defined(key)
    try:
        return parse_dist(raw, kind, read_file=_reader(args))
    except DistError as exc:
        raise args.error_at(key, f"DO_CLIENT: bad {key}: {exc}", exc.hint) from None


def _seed(text: str) -> int:
    if not _SEED.match(text) or int(text) > MAX_SEED:
        raise ValueError(f"expected a whole number 0..{MAX_SEED}, got {text!r}")
    return int(text)


def _load(text: str) -> float:
    value = V.to_float(text)
    if not 0 < value <= 1:
        raise ValueError(f"a load is a share of the bottleneck in (0, 1], got {text!r}")
    return value


def workload_args(args: Args, test: str, driver: str, instances: int) -> dict[str, Any]:
    """The DoClient fields of the workload arguments of one DO_CLIENT (``{}`` when it has none);
    ``req``/``reply`` become the drawn distributions' means."""
    out: dict[str, Any] = {}
    for key in ("req", "reply"):
        if key in args and is_drawn(args.raw(key)):
            if test not in WORKLOAD_TESTS:
                raise args.error_at(key, f"DO_CLIENT: {key}={args.raw(key)} draws sizes: for test=TCP_RR or "
                                         f"TCP_CRR, not {test}")
            dist = distribution(args, key, SIZE)
            out[key] = max(1, round(dist.mean))
            if not dist.constant:
                out[f"{key}_dist"] = dist.text
    if "gap" in args:
        if "arrivals" in args or "load" in args:
            other = "arrivals" if "arrivals" in args else "load"
            raise args.error_at("gap", f"DO_CLIENT: gap= is the closed loop's pause; {other}= makes this "
                                       "DO_CLIENT open loop", "give one of them")
        gap = distribution(args, "gap", TIME)
        if gap.mean > 0:
            out["gap"] = gap.text
    opened = [k for k in OPEN_ONLY if k in args]
    if len(opened) == 2:
        raise args.error_at("load", "DO_CLIENT: give arrivals= or load=, not both",
                            "load= draws Poisson arrivals at that share of the bottleneck")
    if opened:
        key = opened[0]
        if test != "TCP_CRR":
            raise args.error_at(key, f"DO_CLIENT: {key}= (open-loop arrivals) is for test=TCP_CRR, not {test}",
                                "each request then has a connection of its own")
        out["open_loop"] = True
        if key == "arrivals":
            arrivals = distribution(args, "arrivals", TIME)
            if not arrivals.mean > 0:
                raise args.error_at("arrivals", "DO_CLIENT: arrivals= must have a mean above 0")
            out["gap"] = arrivals.text
        else:
            out["load"] = args.get("load", "0", _load)
    if "bottleneck" in args:
        if "load" not in args:
            raise args.error_at("bottleneck", "DO_CLIENT: bottleneck= is the rate load= is a share of",
                                "give load= too, or leave bottleneck= out")
        bw = args.get("bottleneck", "0", V.to_bits)
        if bw <= 0:
            raise args.error_at("bottleneck", "DO_CLIENT: bad bottleneck: a rate above 0, like 100mbit")
        out["bottleneck"] = bw
    drawn = any(k in out for k in ("req_dist", "reply_dist", "gap", "open_loop"))
    if "seed" in args:
        if not drawn:
            raise args.error_at("seed", "DO_CLIENT: seed= seeds drawn sizes and gaps, and this DO_CLIENT draws "
                                        "none", "e.g. req=exp(mean=10K) seed=1")
        out["seed"] = args.get("seed", "0", _seed)
    if drawn and driver != "builtin":
        raise args.error_at("driver", f"DO_CLIENT: drawn sizes and gaps need driver=builtin, not {driver}")
    return out


__all__ = ["OPEN_ONLY", "distribution", "is_drawn", "workload_args"]
