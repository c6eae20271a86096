"""The runner: executes a script's Actions on a lab of agents.

One agent session per host, opened on first use (:mod:`~netesto.controller.session`:
hello once, clock offset from the lowest-RTT of several round trips). The loop hands
each action to its handler in :data:`~netesto.controller.handlers.HANDLERS`; DO_CLIENTs
that follow one another with nothing in between are one *batch*
(:mod:`~netesto.controller.flows`): their flows start at one common instant, expressed in
each client agent's own clock, so flows on different hosts start together; a RAND_WAIT
or WAIT between DO_CLIENTs gives each its own instant, as in the original. GET_DATA
waits for the flows that involve the host instead of racing them, then stores the
host's files in ``<workdir>/<exp>/`` (hosts merge there, as the original's tarballs
did). PROCESS_EXP writes ``experiment.json`` (:mod:`~netesto.controller.records`) and
calls ``netesto.report.experiment.process_experiment`` (data, then exp.html) when the results extra is installed.

Faults: an agent that stops answering is dropped for the rest of the run
(its actions are skipped, every other host's data is still fetched); any
other agent refusal aborts the run after stopping flows and fetching what
exists. Settings are left in place between experiments (the original's
behaviour) and restored on every changed host when the run ends, however it
ends; Ctrl-C stops flows and restores before re-raising.
"""

from __future__ import annotations

import time
from typing import Iterable, Sequence

from netesto.controller.context import Abort, RunContext
from netesto.controller.flows import do_clients
from netesto.controller.handlers import HANDLERS, batched, get_data, process_stored, run_processing, stored
from netesto.controller.names import check_names
from netesto.controller.plan import check_actions
from netesto.controller.progress import (
    ActionFinished,
    ActionStarted,
    ExperimentProcessed,
    HostError,
    Notice,
    RunFinished,
    RunStarted,
)
from netesto.controller.records import ExpState, make_workdir
from netesto.controller.result import ExperimentResult, RunResult
from netesto.controller.signals import RunSignals, exit_status
from netesto.errors import AgentError, LabError, NetestoError, RunInterrupted, StorageError
from netesto.script.actions import Action, DoServer, DoTcpdump, GetData, ProcessExp, RemoteAction


class Runner(RunContext):
    """Executes Actions on ``lab``, storing data under ``workdir`` (options: see :class:`RunContext`)."""

    def validate(self, actions: Iterable[Action]) -> None:
        """LabError naming the first host an action uses that the lab does not have;
        ScriptError at a DO_CLIENT whose flow ids another one of its experiment has."""
        check_actions(actions, self.lab)

    def run(self, actions: Iterable[Action], *, planned: Sequence[Action] | None = None) -> RunResult:
        """Execute ``actions`` in order (a lazy iterator is consumed lazily; a list
        is checked against the lab first, so an unknown host fails before anything runs).
        ``planned``: all that a lazy ``actions`` will give (a plan's actions), checked with the
        agents before anything runs, as a list is."""
        if isinstance(actions, (list, tuple)):
            self.validate(actions)
            planned = actions
        t0 = time.time()
        make_workdir(self.workdir)
        self.emit(RunStarted(lab=self.lab.name, hosts=tuple(self.lab.names), workdir=str(self.workdir)))
        interrupted = False
        aborted: BaseException | None = None
        with RunSignals(self._signalled, stop=self._stop.set) as signals:
            try:
                if planned is not None:  # every flow's algorithm and tool on both of its hosts, before anything runs
                    check_names(self, planned)
                for item in batched(actions):
                    try:
                        if isinstance(item, list):
                            do_clients(self, item)
                        else:
                            self._execute(item)
                    except LabError as exc:  # an unknown host in a lazily consumed script
                        loc = item[0].loc if isinstance(item, list) else item.loc
                        raise LabError(f"{loc}: {exc.message}") from exc
                self._fetch_rest()  # the script's end: its flows still running are part of the run
            except KeyboardInterrupt:
                interrupted = True
            except Abort as exc:
                aborted = exc.__cause__ or exc
            except NetestoError as exc:
                aborted = exc
                self.note(str(exc), exc)
            finally:
                signals.cleanup()  # from here a signal hurries the cleanup; it never skips the restore
                self.phase = "cleanup"
                self.interrupted = interrupted = interrupted or bool(signals.signals)
                self._finish(interrupted=interrupted, aborted=aborted is not None)
        interrupted = interrupted or bool(signals.signals)  # one during the cleanup: the run was stopped too
        result = self._result(time.time() - t0)
        self.emit(RunFinished(experiments=tuple(result.exps), elapsed=result.elapsed, errors=result.errors,
                              interrupted=interrupted))
        if interrupted:
            exps = ", ".join(map(str, result.exps)) or "none"
            kept = "kept and processed" if not self.hurry.is_set() else (
                "kept, not processed (a second signal skipped that: netesto.process_experiment(WORKDIR, EXP) "
                "processes it)")
            err = RunInterrupted(f"interrupted: flows stopped, hosts restored; the data collected so far is "
                                 f"{kept} (experiments {exps} in {self.workdir})", result=result)
            if signals.first is not None or signals.signals:
                err.exit_code = exit_status(signals.first or signals.signals[0])
            raise err
        if self.errors:
            raise self._summary_error(result)
        return result

    def _signalled(self, signum: int) -> None:
        """A signal during the cleanup: its waits (for flows, for processing) are skipped, the restore is not."""
        self.hurry.set()
        self.emit(Notice(host="", text="restoring the hosts, please wait (waits for flows and processing skipped)"))

    def _holding(self, e: ExpState) -> list[str]:
        """The hosts of ``e`` that may still hold data of it for us (connected, alive, not another run's)."""
        return [host for host in sorted(e.hosts) if (held := self.hosts.get(host)) is not None and not held.dead
                and held.client is not None and (host, e.exp) not in self.foreign]

    def _fetch_rest(self) -> None:
        """Fetch every host's data of every experiment once its flows ended (the script's end)."""
        for e in list(self.exps.values()):
            for host in self._holding(e):
                self.current = e
                get_data(self, host, e)

    def _summary_error(self, result: RunResult) -> NetestoError:
        lines = "; ".join(self.errors)
        kept = ", ".join(f"{e.exp} (from {', '.join(sorted(self.exps[e.exp].fetched))})"
                         for e in result.experiments if self.exps[e.exp].fetched)
        unfetched = [str(e.exp) for e in result.experiments if not self.exps[e.exp].fetched]
        msg = f"run failed: {lines}. Data kept for experiment(s): {kept or 'none'} in {self.workdir}"
        if unfetched:  # "(from no host)" said data was kept that was not
            msg += (f"; nothing fetched of experiment(s) {', '.join(unfetched)} (what its agents hold stays "
                    "there: 'netesto run --collect' fetches it)")
        first = self.first_error
        if first is not None and not isinstance(first, AgentError):
            return first  # a script or lab error: keep its type and location
        if isinstance(first, AgentError):
            err: NetestoError = type(first)(msg, host=first.host, kind=first.kind, detail=result)
            err.message = msg  # the host is already named in the text
            err.args = (msg,)
            return err
        return NetestoError(msg, detail=result)

    def _execute(self, a: Action) -> None:
        host = getattr(a, "host", "")
        exp = getattr(a, "exp", None) if isinstance(a, (RemoteAction, ProcessExp)) else None
        # Host settings do not open an experiment (the original drew a counter value
        # for them, which the interpreter still does); they are logged with the current one.
        if isinstance(a, (DoServer, GetData, DoTcpdump, ProcessExp)):
            self.experiment(a).actions.append(a.to_dict())
        elif self.current is not None:
            self.current.actions.append(a.to_dict())
        self.emit(ActionStarted(kind=a.kind, host=host, exp=exp, text=a.args_text(), loc=str(a.loc)))
        t0 = time.time()
        n_err = len(self.errors)
        try:
            handler = next((HANDLERS[c] for c in type(a).__mro__ if c in HANDLERS), None)
            if handler is None:
                raise NetestoError(f"{a.loc}: the runner does not know action {a.kind}")
            handler(self, a)
        finally:
            err = "; ".join(self.errors[n_err:])
            self.emit(ActionFinished(kind=a.kind, host=host, exp=exp, elapsed=time.time() - t0, error=err))

    def collect(self) -> RunResult:
        """Fetch every experiment any reachable agent still holds (after a crashed run).

        Flows still running are waited for (up to ``wait_margin``) first.
        """
        t0 = time.time()
        make_workdir(self.workdir)
        self.collecting = True  # fetching earlier runs' data is the point here
        self.emit(RunStarted(lab=self.lab.name, hosts=tuple(self.lab.names), workdir=str(self.workdir)))
        try:
            for lh in self.lab:
                h = self.remote(lh.name, lambda h: h)
                if h is None:
                    continue
                for name in h.info.unfetched:
                    if not name.isdigit():
                        self.emit(Notice(host=lh.name, text=f"skipping non-numeric experiment {name!r}"))
                        continue
                    self._collect_one(lh.name, int(name))
            for e in self.exps.values():  # what a crashed run left gets the results it never got
                if (e.dir / "flows").is_dir():
                    note = run_processing(self, e)
                    self.emit(ExperimentProcessed(exp=e.exp, path=str(e.dir), note=note))
        except Abort:
            pass
        finally:
            self.sessions.close()
        result = self._result(time.time() - t0)
        self.emit(RunFinished(experiments=tuple(result.exps), elapsed=result.elapsed, errors=result.errors))
        if self.errors:
            raise self._summary_error(result)
        return result

    def _collect_one(self, host: str, exp: int) -> None:
        e = self.exps.get(exp) or ExpState(exp=exp, exp_name="collected", dir=self.workdir / str(exp))
        self.exps[exp] = e
        self.current = e
        e.hosts.add(host)
        self.remote(host, lambda h: h.client.wait_flows(exp, self.wait_margin))
        e.dir.mkdir(parents=True, exist_ok=True)
        paths = self.remote(host, lambda h: h.client.fetch(exp, e.dir))
        if paths is not None:
            e.fetched[host] = 0
            stored(self, host, e, paths)

    def _finish(self, *, interrupted: bool, aborted: bool) -> None:
        """Stop flows if needed, restore, fetch what is left, release; then experiment.json and results.

        The hosts are restored first: before the data is fetched (an agent keeps it whatever
        its settings) and before anything local (processing can take long). A signal here
        (:meth:`_signalled`) skips the waits for flows and the processing, never the restore."""
        if interrupted or aborted:
            for h in self.sessions.live():
                try:
                    h.client.stop()
                except NetestoError as exc:
                    self.emit(HostError(host=h.lab.name, error=f"stop: {exc}"))
        self._restore(interrupted or aborted)
        for e in self.exps.values():
            self._salvage(e, interrupted=interrupted, aborted=aborted)
        self.sessions.close()
        for e in self.exps.values():
            self._record(e, interrupted=interrupted)

    def _restore(self, everywhere: bool) -> None:
        """Restore every changed host (every connected one with ``everywhere``)."""
        for h in self.hosts.values():
            if h.client is None or h.dead or not (h.changed or everywhere):
                continue
            try:
                done = h.client.restore()
            except NetestoError as exc:
                self.emit(HostError(host=h.lab.name, error=f"restore: {exc}"))
                continue
            for error in done.errors:  # what the agent could not put back as it was
                self.emit(HostError(host=h.lab.name, error=f"restore: {error}"))

    def _salvage(self, e: ExpState, *, interrupted: bool, aborted: bool) -> None:
        """Fetch what ``e``'s hosts still hold (the flows are stopped, or ended)."""
        for host in self._holding(e):
            try:
                if interrupted:  # the stopped flows' ends (server ones too) finish their files first
                    self.remote(host, lambda h: h.client.wait_flows(e.exp, timeout=3.0, stop=self.hurry))
                get_data(self, host, e, salvage=aborted or interrupted)
            except Abort:
                pass

    def _record(self, e: ExpState, *, interrupted: bool) -> None:
        """``e``'s experiment.json (and, for a partial experiment, its results unless a second signal
        asked to be done: processing, exp.html's plots above all, takes seconds)."""
        if e.processed or not e.dir.exists():
            return
        try:
            if interrupted and e.flows and not self.hurry.is_set():  # processed, and says it is partial
                process_stored(self, e)
            else:
                self.write_json(e)
        except StorageError as exc:  # a full disk must not lose the rest
            self.note(str(exc), exc)

    def _result(self, elapsed: float) -> RunResult:
        exps = tuple(
            ExperimentResult(
                exp=e.exp, exp_name=e.exp_name, path=e.dir,
                hosts=tuple(sorted(e.hosts)), flows=tuple(r.spec.flow_id for r in e.flows),
                errors=tuple(e.errors),
            )
            for e in self.exps.values()
        )
        return RunResult(workdir=self.workdir, experiments=exps, errors=tuple(self.errors), elapsed=elapsed,
                         interrupted=self.interrupted)


__all__ = ["Runner"]
