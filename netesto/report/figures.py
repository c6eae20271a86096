"""The figures a sweep report draws, chosen by name without writing Python.

``netesto sweep ... --figures share,rate,paper`` (or ``netesto report sweep DIR
--figures ...``), or the point notebook's metadata ``{"netesto": {"figures":
["share", "flows"]}}``, picks them; a name may carry its x axis after a colon
(``share:host_rtt``, ``rate:buffer_bytes``). Without a choice, a sweep whose
points ran flows of some congestion control gets every per-algorithm figure,
the per-flow distributions, the paper's figures and the summary.

>>> chosen("share, rate:bw", None)
['share', 'rate:bw']
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Callable, Sequence

# name: (what it shows, how it is built from (sweep, stats, x))
FIGURES: dict[str, tuple[str, Callable[[Any, Any, "str | None"], Any]]] = {}


def _register() -> None:
    from netesto.plots import study, tradeoff
    from netesto.plots.summary import sweep_figures

    def cc(measure: str) -> Callable[[Any, Any, "str | None"], Any]:
        return lambda sw, st, x: study.by_algorithm(st, measure, x=x)

    def grp(measure: str) -> Callable[[Any, Any, "str | None"], Any]:
        return lambda sw, st, x: study.by_group(st, measure, x=x)

    FIGURES.update({
        "share": ("each congestion control's share of the bottleneck against the swept parameter; dashed, the "
                  "fair share (its flows over all flows) where the grid keeps it fixed", cc("share")),
        "rate": ("each congestion control's goodput (its flows together)", cc("rate")),
        "qdelay": ("each congestion control's queueing delay (smoothed RTT minus min_rtt)", cc("qdelay")),
        "rtt": ("each congestion control's smoothed RTT", cc("rtt")),
        "retrans": ("each congestion control's retransmitted %", cc("retrans_pct")),
        "group-share": ("each flow group's share", grp("share")),
        "group-rate": ("each flow group's goodput", grp("rate")),
        "tradeoff": ("each congestion control's goodput against its queueing delay, a point per grid point joined "
                     "along the swept parameter (better: up and to the left)",
                     lambda sw, st, x: tradeoff.tradeoff(st, x=x)),
        "paper": ("the Netesto paper's figures: goodput per algorithm as bars with RTT as points; retransmits "
                  "and Jain fairness against the number of flows", lambda sw, st, x: study.paper_figures(st, x=x)),
        "flows": ("every flow's steady goodput and queueing delay, per algorithm and x value (box plots)",
                  lambda sw, st, x: study.flow_distributions(sw.flow_table(), x=x)),
        "summary": ("the points' goodput, smoothed RTT, retransmitted % and Jain fairness",
                    lambda sw, st, x: sweep_figures(st, x=x)),
    })


NAMES = ("share", "rate", "qdelay", "rtt", "retrans", "group-share", "group-rate", "tradeoff", "paper", "flows",
         "summary")
DEFAULT_MIXED = ("share", "rate", "qdelay", "tradeoff", "flows", "paper", "summary")


def _split(figures: "str | Sequence[str]") -> list[str]:
    items = figures.split(",") if isinstance(figures, str) else [p for f in figures for p in str(f).split(",")]
    return [i.strip() for i in items if i.strip()]


def chosen(figures: "str | Sequence[str] | None", notebook: "str | Path | None") -> list[str]:
    """The figures asked for (``figures``, else the notebook's metadata ``netesto.figures``); [] means the
    default. A ValueError names an unknown figure (with the closest name) and lists them all."""
    picked = _split(figures) if figures else []
    if not picked and notebook is not None:
        picked = _split(_from_metadata(Path(notebook)))
    for item in picked:
        name = item.split(":", 1)[0]
        if name not in NAMES:
            close = difflib.get_close_matches(name, NAMES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"figure {name!r}{hint}: one of {', '.join(NAMES)}")
    return picked


def _from_metadata(nb: Path) -> "str | list[str]":
    import nbformat

    try:
        meta = nbformat.read(nb, as_version=4).metadata.get("netesto", {})
    except (OSError, ValueError):
        return []
    found = meta.get("figures", []) if isinstance(meta, dict) else []
    return found if isinstance(found, (str, list)) else []


def resolve(picked: Sequence[str], cube: Any) -> list[str]:
    """The figures to draw: those picked, else the default for this cube (per-algorithm ones when its points
    ran flows of a named congestion control)."""
    if picked:
        return list(picked)
    mixed = "cc" in cube.dims and cube.sizes["cc"] > 0 and any(str(c) for c in cube["cc"].values)
    return list(DEFAULT_MIXED) if mixed else ["summary"]


def build(names: Sequence[str], sw: Any, st: Any) -> list[tuple[str, str, Any]]:
    """``(name, caption, holoviews object)`` of each figure; a figure that cannot be drawn from this sweep
    (no algorithm, an unknown x) is a caption saying why and no plot."""
    from netesto.errors import NetestoError

    if not FIGURES:
        _register()
    out = []
    for item in names:
        name, _, x = item.partition(":")
        caption, make = FIGURES[name]
        try:
            out.append((item, caption, make(sw, st, x or None)))
        except (NetestoError, KeyError, ValueError) as exc:
            out.append((item, f"{caption}: not drawn: {exc}", None))
    return out


__all__ = ["DEFAULT_MIXED", "FIGURES", "NAMES", "build", "chosen", "resolve"]
