"""A flow mix: groups of flows of several congestion controls in one experiment, each on its own client host.

One meaning for the two separators, everywhere (``-p``, ``--set``, a ``RUN`` line,
``DO_CLIENT``): a comma lists alternatives that run one after another (``-p
ca=cubic,bbr`` is two points; ``RUN m ca=cubic,bbr`` runs the macro twice, as the
original Netesto did), a ``+`` joins what runs together in one experiment
(``ca=bbr+cubic``: a bbr group and a cubic group). A ``:count`` gives a group its
number of flows (``bbr:2+cubic:1``); ``dur`` and ``delay`` take one value for
every group or a ``+`` list with one per group.

>>> m = Mix.parse("bbr:2+cubic", dur="30+20", delay="0+10", flows=1)
>>> [(g.ca, g.flows, g.dur, g.delay, g.host) for g in m.groups]
[('bbr', 2, 30.0, 0.0, 'h2'), ('cubic', 1, 20.0, 10.0, 'h3')]
>>> m.defines()["ca2"], m.hosts, m.end
('cubic', ['h1', 'h2', 'h3'], 30.0)

Group *k* runs from host ``h<k+1>`` to the server ``h1`` (``server=`` and
``first_client=`` change that), so a host's own RTT (``host_rtt``, see
docs/testbed.md) is its group's RTT.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from netesto.errors import SweepError

_CC = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
MAX_GROUPS = 16


@dataclass(frozen=True)
class Group:
    """One group of a mix: its congestion control, number of flows, duration and start delay (s), client."""

    ca: str
    flows: int
    dur: float
    delay: float
    host: str


def _numbers(text: str | float | int, what: str, n: int, low: float) -> list[float]:
    parts = [p.strip() for p in str(text).split("+")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise SweepError(f"{what}={text!r}: seconds, or one value per group of ca joined with + (30+20)") from None
    if any(not (v >= low) or v != v or v == float("inf") for v in values):
        raise SweepError(f"{what}={text!r}: each value a finite number of seconds, at least {low:g}")
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise SweepError(f"{what}={text!r}: {len(values)} values for {n} group(s) of ca; give one, or one per group")
    return values


@dataclass(frozen=True)
class Mix:
    """The groups of one experiment (see the module)."""

    groups: tuple[Group, ...]
    server: str = "h1"

    @classmethod
    def parse(cls, ca: str, *, dur: str | float | int = 3, delay: str | float | int = 0, flows: int = 1,
              server: str = "h1", first_client: int = 2) -> "Mix":
        """``ca`` (``cubic``, ``bbr+cubic``, ``bbr:2+cubic:1``) with each group's duration and delay."""
        text = str(ca).strip()
        if "," in text:
            raise SweepError(f"ca={text!r}: a comma separates points of a sweep (or RUN repetitions); flows of "
                             "several congestion controls in one experiment are joined with + (bbr+cubic)")
        items = [i.strip() for i in text.split("+")]
        if not 1 <= len(items) <= MAX_GROUPS:
            raise SweepError(f"ca={text!r}: 1 to {MAX_GROUPS} groups")
        if isinstance(flows, bool) or not isinstance(flows, int) or flows < 1:
            raise SweepError(f"flows={flows!r}: a number of flows, at least 1")
        durs = _numbers(dur, "dur", len(items), 0.001)
        delays = _numbers(delay, "delay", len(items), 0.0)
        groups = []
        for k, item in enumerate(items):
            name, sep, count = item.partition(":")
            if not _CC.match(name):
                raise SweepError(f"ca={text!r}: {name!r} is no congestion control name (letters, digits, _ . -)")
            if sep and not (count.isdigit() and 1 <= int(count) <= 10_000):
                raise SweepError(f"ca={text!r}: {item!r}: a count of flows after ':' (bbr:2)")
            groups.append(Group(name, int(count) if sep else flows, durs[k], delays[k], f"h{first_client + k}"))
        return cls(tuple(groups), server)

    @property
    def hosts(self) -> list[str]:
        """The server, then each group's client."""
        return [self.server, *(g.host for g in self.groups)]

    @property
    def end(self) -> float:
        """Seconds from the flows' common start until the last group ends."""
        return max(g.delay + g.dur for g in self.groups)

    def defines(self) -> dict[str, str]:
        """The script's variables: ``ca1``, ``dur1``, ``delay1``, ``flows1``, ``host1`` ... and ``server``, ``wait``."""
        out = {"server": self.server, "wait": f"{self.end:g}"}
        for k, g in enumerate(self.groups, 1):
            out.update({f"ca{k}": g.ca, f"dur{k}": f"{g.dur:g}", f"delay{k}": f"{g.delay:g}",
                        f"flows{k}": str(g.flows), f"host{k}": g.host})
        return out

    def script(self, exp_name: str = "mix") -> str:
        """A script running the mix as one experiment: every value is a variable of :meth:`defines`
        (handed to the run as -D values are, never spliced into the text)."""
        if not re.match(r"^[A-Za-z0-9_.-]{1,64}$", exp_name):
            raise SweepError(f"exp_name {exp_name!r}: letters, digits, _ . -")
        lines = [f"DO_SERVER host=$server exp=COUNTER expName={exp_name} start=1"]
        lines += [f"DO_CLIENT host=$host{k} server=$server ca=$ca{k} dur=$dur{k} delay=$delay{k} "
                  f"instances=$flows{k} test=TCP_STREAM stats=1" for k in range(1, len(self.groups) + 1)]
        lines += ["WAIT $wait", "DO_SERVER host=$server order=1", "GET_DATA host=$server"]
        lines += [f"GET_DATA host=$host{k}" for k in range(1, len(self.groups) + 1)]
        lines += ["PROCESS_EXP"]
        return "\n".join(lines) + "\n"


__all__ = ["Group", "MAX_GROUPS", "Mix"]
