"""The shape an experiment really ran under: a testbed's bottleneck read back from the kernels at its start.

A lab file's ``[testbed]`` table says what the testbed was shaped to when the file was
written; a reshape since, a SET_NETEM, or a hand-typed tc change make it wrong. At an
experiment's first flows the run asks each of its hosts' agents what shapes the host's
path (agent ``shape``: the router's device toward the host for rate, queue and the delay
line's delay; the host's own device for netem) and records that in experiment.json:
``hosts.<h>.shape`` per host, and ``testbed``'s bw, rtt, buffer, loss and jitter as
measured. A difference from the lab file is said as a Notice.

>>> one_way({"path": {"delay_ms": 5.0}, "egress": {"delay_ms": 0.0}})
(5.0, 0.0, 0.0)
"""

from __future__ import annotations

from typing import Any, Iterable

from netesto.controller.context import RunContext
from netesto.controller.progress import Notice
from netesto.controller.records import ExpState
from netesto.controller.session import HostSession
from netesto.errors import AgentError, AgentUnreachable
from netesto.raw.experiment import short_host

# The lab file's [testbed] keys a measurement replaces, with their units as the lab file has them.
MEASURED = {"bw": "bit/s", "rtt": "ms", "buffer": "bytes", "loss": "", "jitter": "ms"}


def one_way(entry: dict[str, Any]) -> tuple[float, float, float]:
    """A host's ``(delay, jitter, loss)`` on its path, both directions added (its egress netem
    and the router's queue toward it)."""
    delay = jitter = 0.0
    keep = 1.0
    for part in ("path", "egress"):
        got = entry.get(part) or {}
        delay += float(got.get("delay_ms") or 0.0)
        jitter += float(got.get("jitter_ms") or 0.0)
        keep *= 1.0 - float(got.get("loss") or 0.0)
    return delay, jitter, 1.0 - keep


def summarize(shapes: dict[str, dict[str, Any]], pairs: Iterable[tuple[str, str]],
              own: Iterable[str] = ()) -> dict[str, Any]:
    """The testbed values of the measured ``shapes`` (short host name -> entry) for the
    experiment's client-server ``pairs``: the narrowest rate and queue, the longest RTT. With
    hosts that have an RTT of their ``own`` (the lab's ``host_rtt``), ``rtt`` is the base one (twice
    the delay toward the other hosts) and ``host_rtt`` each such host's RTT to them, as the lab
    file has them.

    >>> path = lambda ms: {"path": {"delay_ms": ms}}
    >>> summarize({"h1": path(5.0), "h2": path(5.0), "h3": path(25.0)}, [("h2", "h1"), ("h3", "h1")], ["h3"])
    {'rtt': 10.0, 'jitter': 0.0, 'loss': 0.0, 'host_rtt': {'h3': 30.0}}
    """
    out: dict[str, Any] = {}
    rates = [e["path"]["rate_bps"] for e in shapes.values() if "rate_bps" in (e.get("path") or {})]
    queues = [e["path"]["buffer_bytes"] for e in shapes.values() if "buffer_bytes" in (e.get("path") or {})]
    if rates:
        out["bw"] = min(rates)
    if queues:
        out["buffer"] = min(queues)
    trips = []
    for a, b in pairs:
        if a in shapes and b in shapes:
            (da, ja, la), (db, jb, lb) = one_way(shapes[a]), one_way(shapes[b])
            trips.append((da + db, ja + jb, max(la, lb)))
    if trips:
        rtt, jitter, loss = max(trips)
        out.update(rtt=round(rtt, 3), jitter=round(jitter, 3), loss=round(loss, 6))
    own = set(own)
    base = [one_way(e)[0] for h, e in shapes.items() if h not in own and e]
    if trips and own and base:
        delay = max(base)  # the hosts without an RTT of their own share one delay
        out["rtt"] = round(2 * delay, 3)
        out["host_rtt"] = {h: round(one_way(shapes[h])[0] + delay, 3) for h in sorted(own) if shapes.get(h)}
    return out


def _read(r: RunContext, agent: str, dev: str) -> dict[str, Any] | None:
    def ask(h: HostSession) -> Any:
        if "shape" not in h.info.commands:  # an agent older than the command
            return None
        try:
            return h.client.shape([dev])
        except AgentUnreachable:
            raise
        except AgentError as exc:  # a record the run can do without: said, not fatal
            r.emit(Notice(host=agent, text=f"cannot read the shape of {dev}: {exc.message}"))
            return None

    reply = r.remote(agent, ask)
    return dict(reply.devs.get(dev) or {}) if reply is not None else None


def measure(r: RunContext, e: ExpState, pairs: list[tuple[str, str]]) -> None:
    """Read ``e``'s hosts' shape once, at its first flows (a testbed's lab only)."""
    if not r.lab.testbed or e.shape is not None:
        return
    e.shape = {}
    for name in sorted({h for pair in pairs for h in pair}):
        lh = r.lab.resolve(name)
        entry: dict[str, Any] = {}
        if lh.shape is not None and (got := _read(r, lh.shape.agent, lh.shape.dev)) is not None:
            entry["path"] = got
        if lh.dev and (got := _read(r, lh.name, lh.dev)) is not None:
            entry["egress"] = got
        e.shape[short_host(name)] = entry
    e.measured = summarize(e.shape, [(short_host(a), short_host(b)) for a, b in pairs],
                           own=(r.testbed.get("host_rtt") or {}).keys())
    said = [f"{k} {v:g} {MEASURED[k]}".rstrip() + f" (lab file: {r.testbed[k]:g})"
            for k, v in e.measured.items()
            if isinstance(r.testbed.get(k), (int, float)) and abs(float(v) - float(r.testbed[k])) > 1e-3 * max(1.0, abs(float(v)))]
    if said:
        r.emit(Notice(host="", text=f"experiment {e.exp} starts on a testbed shaped otherwise than its lab file "
                                    f"says: {', '.join(said)}; experiment.json records what the kernels say"))


__all__ = ["MEASURED", "measure", "one_way", "summarize"]
