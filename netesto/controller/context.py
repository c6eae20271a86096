"""The state one run shares between the loop and the action handlers, and the calls they all make.

:class:`RunContext` holds the lab, the working directory, the host sessions, the
experiments seen so far and the run's errors; :meth:`RunContext.remote` is the one
way a handler talks to an agent (an unreachable agent is dropped, a refusal aborts
the run). :class:`~netesto.controller.runner.Runner` is the context plus the loop.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from netesto.controller import startlead
from netesto.controller.claim import LabClaim, new_token
from netesto.controller.lab import Lab
from netesto.controller.links import RunLinks
from netesto.controller.plan import FlowKey
from netesto.controller.progress import (
    ExperimentStarted,
    FlowProgress,
    HostError,
    Notice,
    ProgressCallback,
    ProgressEvent,
)
from netesto.controller.records import ExpState, RunFacts, experiment_json, start_notices, write_json
from netesto.controller.schedule import start_skew
from netesto.controller.session import ClientFactory, HostSession, Sessions, default_client_factory
from netesto.errors import AgentError, AgentUnreachable, NetestoError, StorageError, UsageError
from netesto.script.actions import DoClient, ProcessExp, RemoteAction

IPERF3_PORT = 5201  # iperf3's default port; one server per flow from here up
NETSERVER_PORT = 12865  # netperf's netserver control port


class Abort(Exception):
    """Internal: stop executing actions (the cause is in ``__cause__``)."""


class RunContext:
    """A run's shared state: lab, workdir, sessions (``hosts``), experiments (``exps``), errors."""

    def __init__(
        self,
        lab: Lab,
        workdir: str | Path = ".",
        *,
        progress: ProgressCallback | None = None,
        client_factory: ClientFactory = default_client_factory,
        lead: float | None = None,
        lead_per_host: float | None = None,
        wait_margin: float = 15.0,
        clock_samples: int = 8,
        clock_refresh: float = 60.0,
        script: str = "",
        rng: random.Random | None = None,
        seed: int | None = None,
        defines: dict[str, str] | None = None,
        cancel: threading.Event | None = None,
        iperf3_port: int = IPERF3_PORT,
        testbed: Mapping[str, Any] | None = None,
        steady: str | None = None,
        trace: str = "",
        claim: LabClaim | None = None,
    ) -> None:
        self.lab = lab
        self.trace = trace  # the ends of DO_CLIENTs without trace= that record tcp_probe (controller/observe.py)
        self.workdir = Path(workdir)
        self.progress = progress
        # None: learned from the hosts' readiness (controller/startlead.py); a number: used as given
        self.lead = lead
        self.lead_per_host = startlead.FIXED_PER_HOST if lead_per_host is None else lead_per_host
        self.wait_margin = wait_margin
        self.script = script
        # RAND_WAITs draw from a seeded generator: experiment.json records the seed
        self.seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
        self.rng = rng or random.Random(self.seed)
        self.defines = dict(defines or {})
        self.steady = steady  # the warm-up PROCESS_EXP leaves out of the per-flow numbers ("5s", "10rtt")
        # The testbed's bottleneck as a result's parameters (bw, rtt, ...): given, or the lab's.
        self.testbed = dict(testbed if testbed is not None else lab.testbed)
        # run_id names this run to another controller that finds the lab busy; the token proves a
        # request belongs to it. Under a held LabClaim (a reshape and runs nobody may come between)
        # the run uses the claim's, and leaves the releasing to it.
        if claim is not None and not claim.held:
            raise UsageError(f"{claim!r}: a run goes on under a held claim (use it in its with block)")
        self.run_id = claim.run_id if claim is not None else secrets.token_hex(4)
        self.token = claim.token if claim is not None else new_token()
        self.sessions = Sessions(lab, client_factory, run_id=self.run_id, token=self.token, release=claim is None,
                                 emit=self.emit, on_event=self.agent_event,
                                 clock_samples=clock_samples, clock_refresh=clock_refresh)
        self.hosts: dict[str, HostSession] = self.sessions.hosts
        self.exps: dict[int, ExpState] = {}
        self.errors: list[str] = []
        self.first_error: NetestoError | None = None
        self.iperf3_port = iperf3_port
        self.current: ExpState | None = None
        self.collecting = False
        self.interrupted = False
        self._stop = cancel if cancel is not None else threading.Event()
        self.phase = "run"  # then "cleanup": flows stopped or ended, hosts being restored
        self.hurry = threading.Event()  # set by a signal during the cleanup: its waits are skipped
        self.foreign: set[tuple[str, int]] = set()  # (host, exp) holding an earlier run's data
        self.pairs: dict[FlowKey, DoClient] = {}  # flow ids given out so far (a clash is a ScriptError)
        self.links = RunLinks()  # SET_LINK schedules (netesto.controller.links)

    def emit(self, event: ProgressEvent) -> None:
        """Hand ``event`` to the progress sink (a broken sink is ignored)."""
        if self.progress is not None:
            try:
                self.progress(event)
            except Exception:  # a broken display must not break the experiment
                pass

    def note(self, text: str, exc: NetestoError | None = None) -> None:
        """Record an error of the run (and of the current experiment)."""
        self.errors.append(text)
        if self.first_error is None and exc is not None:
            self.first_error = exc
        if self.current is not None:
            self.current.errors.append(text)

    def experiment(self, action: RemoteAction | ProcessExp) -> ExpState:
        """The state of ``action``'s experiment (started now if new); it becomes the current one."""
        e = self.exps.get(action.exp)
        if e is None:
            name = getattr(action, "exp_name", "Exp")
            e = ExpState(exp=action.exp, exp_name=name, dir=self.workdir / str(action.exp))
            self.exps[action.exp] = e
            self.emit(ExperimentStarted(exp=e.exp, exp_name=e.exp_name))
        self.current = e
        return e

    def remote(self, name: str, what: Callable[[HostSession], Any]) -> Any:
        """Run ``what`` on host ``name``: unreachable -> drop host; refusal -> abort.

        Opening the session (hello, clock offset) is inside the same handling."""
        try:
            h = self.sessions.open(name)
            self._check_leftover(h)
            return what(h)
        except AgentUnreachable as exc:
            self.drop(name, exc)
            return None
        except (AgentError, StorageError) as exc:
            self.note(str(exc), exc)
            raise Abort() from exc

    def _check_leftover(self, h: HostSession) -> None:
        """Refuse to use an experiment number whose data from an earlier run the host
        still holds: this run's files would be written over it (the agent keeps data
        per experiment number, and another workdir's counter may reach the same one)."""
        e = self.current
        if e is None or self.collecting or str(e.exp) not in h.leftover:
            return
        self.foreign.add((h.lab.name, e.exp))
        raise AgentError(
            f"holds unfetched data of experiment {e.exp} from an earlier run, which this "
            f"run would overwrite: fetch it first ('netesto run --collect --lab LAB --workdir OTHER_DIR' "
            f"or netesto.controller.collect) or move {self.workdir / 'counter'} past {e.exp}",
            host=h.lab.name, kind="LeftoverData")

    def drop(self, name: str, exc: AgentError) -> None:
        """Drop host ``name`` for the rest of the run (reported once)."""
        if self.sessions.drop(name, exc):
            host = self.lab.resolve(name).name
            self.note(f"{host} unreachable: {exc.message}", exc)
            self.emit(HostError(host=host, error=str(exc), fatal=True))

    def sleep(self, seconds: float) -> None:
        """Sleep (cancellable), delivering the agents' pushed flow events meanwhile. A cancel stops the
        run (KeyboardInterrupt) while it runs; in its cleanup (a link schedule's settling) only a hurry
        ends the sleep, early, and never by raising: the restore and the fetch go on."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            if self.wait_stop.wait(min(left, 0.25)):
                if self.phase == "run":
                    raise KeyboardInterrupt("run cancelled")
                return
            if self.progress is not None:
                self.sessions.poll_events()

    def cancel(self) -> None:
        """Ask a running :meth:`run` (in another thread) to stop at the next wait; a second
        cancel (or one during the cleanup) skips the cleanup's waits, never the restore."""
        if self._stop.is_set() or self.phase == "cleanup":
            self.hurry.set()
        self._stop.set()

    @property
    def wait_stop(self) -> threading.Event:
        """What ends a wait for flows early: a cancel while the run runs, a hurry in its cleanup."""
        return self.hurry if self.phase == "cleanup" else self._stop

    def check_cancel(self) -> None:
        """KeyboardInterrupt if the run was cancelled (a wait that ended early for it)."""
        if self.phase == "run" and self._stop.is_set():
            raise KeyboardInterrupt("run cancelled")

    def agent_id(self, host: str) -> str:
        """What identifies ``host``'s agent beyond this run (its control address and port)."""
        h = self.lab.resolve(host)
        return f"{h.control}:{h.port}"

    def start_lead(self, hosts: list[str], learned: bool = True) -> float:
        """Seconds from scheduling a batch with flows on ``hosts`` to its common instant: as given to
        the run, else learned from these hosts' readiness (``learned``: the batch's flows all tell it)."""
        if self.lead is not None or not learned:
            fixed = startlead.FIXED if self.lead is None else self.lead
            return fixed + self.lead_per_host * max(0, len(hosts) - 1)
        return startlead.lead([self.agent_id(h) for h in hosts], per_host=self.lead_per_host)

    def agent_event(self, host: str, ev: Any) -> None:
        """Engine events relayed by an agent (may run on the client's thread)."""
        data = ev if isinstance(ev, dict) else getattr(ev, "data", {}) or {}
        kind = str(data.get("event", getattr(ev, "event", "")))
        flow = str(data.get("flow", ""))
        exp = data.get("exp")
        if kind == "started" and flow:
            t = data.get("t_wall", data.get("start_wall"))
            if isinstance(t, (int, float)):
                for e in list(self.exps.values()):
                    for rec in e.flows:
                        if rec.spec.flow_id == flow and rec.host == host and rec.start_skew is None:
                            rec.start_skew = start_skew(float(t), rec.start_agent)
                            ready = data.get("ready")
                            if rec.teaches_lead and isinstance(ready, (int, float)):
                                startlead.learn(self.agent_id(host), float(ready) - rec.scheduled_agent)
                    for text in start_notices(e, host):  # a late start, said as it happens
                        self.emit(Notice(host=host, text=text))
        try:
            exp = int(exp) if exp is not None else None
        except (TypeError, ValueError):
            exp = None
        self.emit(FlowProgress(host=host, exp=exp, flow=flow, event=kind, data=dict(data)))

    def experiment_json(self, e: ExpState) -> dict[str, Any]:
        """``e``'s experiment.json document as it stands now."""
        facts = RunFacts(script=self.script, seed=self.seed, defines=self.defines, testbed=self.testbed)
        return experiment_json(e, lab=self.lab, hosts=self.hosts, facts=facts, interrupted=self.interrupted)

    def write_json(self, e: ExpState, *, partial: bool = False) -> Path:
        """Write ``e``'s experiment.json; ``partial``: before its flows start, marked interrupted
        until the run completes it (a controller killed meanwhile leaves one that says so)."""
        doc = self.experiment_json(e)
        if partial:
            doc["interrupted"] = True
        return write_json(e, doc)


__all__ = ["Abort", "IPERF3_PORT", "NETSERVER_PORT", "RunContext"]
