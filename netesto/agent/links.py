"""The router's link schedules: each step applied at its instant in this agent's clock, the link put back after.

A ``link_schedule`` request names a link (a device toward a host), the
flows' start ``t0`` and end ``until`` in this agent's clock (``time.time``),
and steps ``[seconds after t0, parameter, value]`` (:mod:`netesto.linkshape`);
a thread per link waits for each instant and has the lab's *link backend*
apply it, then reads the value back. At ``until``, on ``link_stop``, on a
``stop`` or ``restore`` of the run, when the controller's lease lapses or
the agent stops, the link takes back the shape it had before the schedule.
The shapes to put back are journaled (``.agent/links.json``), so an agent
restarted after a crash restores them too.

The backend is named by ``NETESTO_LINK_BACKEND`` (``module:function``,
called with the device; a testbed's router agent gets
:mod:`netesto.testbed.linkctl`). An agent without one refuses schedules.

What happened goes to ``<exp>/links/<dev>.json`` in the experiment's data
(fetched with it): the shape before, each step with the instant its change
began (``start``) and the instant it was in force (``applied``), in this
agent's clock, the value read back, and how the schedule ended; a trace
link's trace is kept beside it (``<dev>.trace``).
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from netesto.agent import tc
from netesto.agent.store import DataStore
from netesto.errors import AgentError, NetestoError, PolicyError
from netesto.linkshape import MAX_STEPS, PARAMS
from netesto.linktrace import parse_trace
from netesto.protocol.commands import LinkScheduleArgs
from netesto.protocol.replies import LinkScheduleReply, LinkStopReply

log = logging.getLogger("netesto.agent.links")

MAX_SPAN = 7 * 86400.0  # s from t0 to until
JOIN_S = 25.0  # a backend call may take a tc's 20 s timeout
SWITCH_S = 0.0005  # the GIL's switch interval while a schedule runs (Python's 5 ms would delay a step by up to that)
RT_PRIORITY = 5  # SCHED_FIFO of a schedule's thread and its tc children (the delay line's loop has 10)


class LinkBackend(Protocol):
    """What the agent asks of a lab's link (values in :data:`netesto.linkshape.PARAMS` units)."""

    def read(self) -> dict[str, float]: ...  # the link's shape now
    def prepare(self, params: list[str]) -> None: ...  # these will change soon: get ready (a tc waiting)
    def apply(self, param: str, value: float) -> None: ...  # change one, now
    def readback(self, param: str) -> float | None: ...  # one as the link has it
    def trace(self, path: str | None, name: str, epoch_ns: int, limit_bytes: int,
              limit_packets: int) -> dict[str, Any]: ...  # trace-driven from epoch (monotonic ns); None: not
    def restore(self, base: dict[str, float]) -> list[str]: ...  # the shape back, trace off; errors
    def close(self) -> None: ...


def load_backend(spec: str) -> Callable[[str], LinkBackend]:
    """The backend factory ``module:function`` names."""
    module, _, func = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), func or "backend")  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise AgentError(f"NETESTO_LINK_BACKEND={spec!r} cannot be loaded: {exc}", kind="Unavailable") from exc


def _steps(raw: list[Any]) -> list[tuple[float, str, float]]:
    """The request's steps checked: known parameters, values in range, times >= 0; sorted by time."""
    if len(raw) > MAX_STEPS * len(PARAMS):
        raise PolicyError(f"{len(raw)} steps is more than a schedule may have", kind="PolicyError")
    out = []
    for step in raw:
        if not (isinstance(step, (list, tuple)) and len(step) == 3 and isinstance(step[1], str)
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (step[0], step[2]))):
            raise AgentError(f"bad step {step!r:.80}: expected [seconds, parameter, value]", kind="UsageError")
        at, param, value = float(step[0]), step[1], float(step[2])
        p = PARAMS.get(param)
        if p is None:
            raise PolicyError(f"unknown link parameter {param!r} (parameters: {', '.join(PARAMS)})", kind="PolicyError")
        if not (math.isfinite(value) and p.low <= value <= p.high):
            raise PolicyError(f"{param}={value:g} {p.unit} is outside {p.low:g}..{p.high:g}", kind="PolicyError")
        if not (math.isfinite(at) and 0 <= at <= MAX_SPAN):
            raise PolicyError(f"step time {at!r} is outside 0..{MAX_SPAN:g} s", kind="PolicyError")
        out.append((at, param, value))
    return sorted(out, key=lambda s: s[0])


def realtime() -> str:
    """Run this thread (and the processes it starts) at SCHED_FIFO :data:`RT_PRIORITY` when allowed: on a
    machine whose CPUs are busy, an ordinary thread waits tens of ms for one after its instant."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))  # 0: this thread only
    except (OSError, AttributeError) as exc:
        return f"normal priority ({exc})"
    return f"SCHED_FIFO {RT_PRIORITY}"


class LinkRun:
    """One link's schedule: a thread that applies its steps at their instants, then puts the link back."""

    def __init__(self, exp: str, dev: str, args: LinkScheduleArgs, backend: LinkBackend, record: Path,
                 host: str) -> None:
        self.exp, self.dev, self.backend, self.path = exp, dev, backend, record
        self.t0, self.until = float(args.t0), float(args.until)
        self.steps = _steps(args.steps)
        self.stopping = threading.Event()
        self.ended = threading.Event()  # the link has its shape back (or could not get it)
        self.on_end: Callable[[], None] = lambda: None
        self.why = "until"
        self.doc: dict[str, Any] = {"dev": dev, "exp": exp, "host": args.host or host,
                                    "clock": f"{args.host or host}'s time.time()", "t0": self.t0,
                                    "until": self.until, "base": {}, "trace": None, "steps": [], "ended": None}
        self.thread = threading.Thread(target=self._run, name=f"link {dev}", daemon=True)

    def write(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.doc, indent=1))
        os.replace(tmp, self.path)

    def _apply(self, group: list[tuple[float, str, float]]) -> None:
        """Steps due at one instant: all changed first, then each read back (a read-back is a tc call)."""
        done = []
        for at, param, value in group:
            rec: dict[str, Any] = {"at": at, "param": param, "value": value, "start": time.time()}
            try:
                self.backend.apply(param, value)
                rec["applied"] = time.time()
            except Exception as exc:  # the schedule goes on: the record says what did not happen
                rec["applied"], rec["error"] = None, str(exc)
            done.append(rec)
        for rec in done:
            try:
                rec["readback"] = self.backend.readback(rec["param"])
            except Exception as exc:
                rec["readback"], rec["error"] = None, rec.get("error") or f"read back: {exc}"
        self.doc["steps"] += done
        self.write()

    def _run(self) -> None:
        realtime()
        try:
            groups: dict[float, list[tuple[float, str, float]]] = {}
            for step in self.steps:
                groups.setdefault(step[0], []).append(step)
            for at, group in groups.items():
                if self.t0 + at > self.until:
                    self.doc["steps"] += [{"at": a, "param": p, "value": v, "skipped": "after the flows' end"}
                                          for a, p, v in group]
                    continue
                self.backend.prepare([p for _, p, _ in group])
                if self.stopping.wait(max(0.0, self.t0 + at - time.time())):
                    break
                self._apply(group)
            self.stopping.wait(max(0.0, self.until - time.time()))
        except Exception as exc:
            log.error("link schedule on %s failed: %s", self.dev, exc)
            self.why = f"failed: {exc}"
        finally:
            self._end()

    def _end(self) -> None:
        ended: dict[str, Any] = {"at": time.time(), "why": self.why}
        try:
            ended["errors"] = self.backend.restore(self.doc["base"])
            ended["restored_at"] = time.time()
            ended["shape"] = self.backend.read()
        except Exception as exc:
            ended["errors"] = [*ended.get("errors", []), f"restore: {exc}"]
        finally:
            self.backend.close()
        self.doc["ended"] = ended
        try:
            self.write()
        except OSError as exc:
            log.error("link schedule on %s: cannot write %s: %s", self.dev, self.path, exc)
        self.ended.set()
        self.on_end()

    def stop(self, why: str) -> list[str]:
        """End the schedule now (or once the backend call in progress returns); what could not be put back."""
        if self.thread.is_alive():
            self.why = why
            self.stopping.set()
            self.thread.join(JOIN_S)
            if self.thread.is_alive():
                return [f"{self.dev}: the schedule did not end within {JOIN_S:g} s"]
        ended = self.doc.get("ended") or {}
        return [f"{self.dev}: {e}" for e in ended.get("errors", [])]


class LinkShaper:
    """This agent's running link schedules, by device."""

    def __init__(self, store: DataStore, name: str = "", spec: str | None = None) -> None:
        self.store = store
        self.name = name
        self.spec = os.environ.get("NETESTO_LINK_BACKEND", "") if spec is None else spec
        self.runs: dict[str, LinkRun] = {}
        self.journal = store.private / "links.json"
        self.lock = threading.Lock()  # the journal is written from the schedules' threads too

    def _factory(self) -> Callable[[str], LinkBackend]:
        if not self.spec:
            raise AgentError("this agent has no link backend (NETESTO_LINK_BACKEND): link schedules need a "
                             "testbed's router agent", kind="Unavailable")
        return load_backend(self.spec)

    def _journal(self) -> None:
        """The shapes to put back if this agent dies: those of the links whose schedules have not ended."""
        with self.lock:
            entries = {dev: {"exp": r.exp, "base": r.doc["base"]} for dev, r in list(self.runs.items())
                       if not r.ended.is_set() and r.doc["base"]}
            self.store.write_private_json(self.journal.name, json.dumps(entries))

    def start(self, args: LinkScheduleArgs, exp: str) -> LinkScheduleReply:
        """Start a schedule on ``args.dev`` (one already there ends first, its link put back)."""
        dev = tc.check_dev(args.dev)
        t0, until = float(args.t0), float(args.until)
        if not (math.isfinite(t0) and math.isfinite(until) and 0 <= until - t0 <= MAX_SPAN):
            raise AgentError(f"bad schedule span t0={t0!r} until={until!r}", kind="UsageError")
        factory = self._factory()
        if dev in self.runs:
            self.runs.pop(dev).stop("replaced by the next schedule")
        folder = self.store.exp_dir(exp) / "links"
        folder.mkdir(exist_ok=True)
        backend = factory(dev)
        base: dict[str, float] = {}
        try:
            run = LinkRun(exp, dev, args, backend, folder / f"{dev}.json", self.name)
            base = run.doc["base"] = backend.read()
            run.on_end = self._journal
            self.runs[dev] = run
            self._journal()
            if args.trace is not None:
                run.doc["trace"] = self._trace(run, args.trace, folder / f"{dev}.trace")
            run.write()
        except BaseException:
            self.runs.pop(dev, None)
            try:
                if base:
                    backend.restore(base)
            finally:
                backend.close()
                self._journal()
            raise
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_S))
        run.thread.start()
        log.info("link schedule on %s for experiment %s: %d step(s)%s from %.3f to %.3f", dev, exp, len(run.steps),
                 " and a trace" if args.trace else "", t0, until)
        trace = run.doc["trace"]
        return LinkScheduleReply(dev, run.doc["base"], len(run.steps), trace["sha256"] if trace else None)

    def _trace(self, run: LinkRun, spec: dict[str, Any], path: Path) -> dict[str, Any]:
        text = spec.get("text")
        name = str(spec.get("name", "trace"))
        if not isinstance(text, str):
            raise AgentError("trace: its text is missing", kind="UsageError")
        try:
            trace = parse_trace(text, name)
        except ValueError as exc:
            raise AgentError(f"trace: {exc}", kind="UsageError") from None
        limits = [spec.get("limit_bytes", 0), spec.get("limit_packets", 0)]
        if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 2**31 for x in limits):
            raise AgentError(f"trace: bad queue limits {limits!r}", kind="UsageError")
        path.write_text(text)
        epoch = time.monotonic_ns() + int((run.t0 - time.time()) * 1e9)
        got = run.backend.trace(str(path), name, epoch, limits[0], limits[1])
        return {"name": name, "sha256": trace.sha256, "opportunities": trace.opportunities,
                "period_ms": trace.period_ms, "mean_bps": trace.mean_bps, "limit_bytes": limits[0],
                "limit_packets": limits[1], "file": f"links/{path.name}", "set": time.time(), "delay_line": got}

    def stop(self, exp: str | None = None, why: str = "stopped") -> LinkStopReply:
        """End the schedules of ``exp`` (all if None), each link back as it was."""
        stopped, errors = [], []
        for dev, run in list(self.runs.items()):
            if exp is not None and run.exp != exp:
                continue
            errors += run.stop(why)
            stopped.append(dev)
            del self.runs[dev]
        if stopped:
            self._journal()
            log.info("link schedules ended (%s): %s%s", why, ", ".join(stopped), f"; errors: {errors}" if errors else "")
        return LinkStopReply(stopped, errors)

    def recover(self) -> list[str]:
        """At start: links a crashed agent left changed, put back from the journal; what was done."""
        try:
            entries = json.loads(self.journal.read_text())
        except (OSError, ValueError):
            return []
        done = []
        for dev, entry in entries.items() if isinstance(entries, dict) else ():
            try:
                backend = self._factory()(dev)
                try:
                    errors = backend.restore(entry.get("base") or {})
                finally:
                    backend.close()
                done.append(f"link {dev}" + (f" (errors: {errors})" if errors else ""))
            except (NetestoError, OSError) as exc:
                done.append(f"link {dev}: not restored: {exc}")
        self.store.write_private_json(self.journal.name, "{}")
        return done


__all__ = ["LinkBackend", "LinkRun", "LinkShaper", "load_backend", "realtime"]
