"""The one plan path: a script (text or file) resolved into its actions, once.

``netesto run``, :func:`netesto.run`, the ``%%netesto`` magic (and its ``--plan``)
and ``netesto plan`` all call :func:`make_plan`: the same SOURCE search path (the
current directory, the script's directory, the workdir), the workdir's counter
(read, never written by a plan), the lab's host_suffix and the session's state. A
run then executes the plan's actions and writes the counter file as it reaches
them (:meth:`Plan.counted`), as the original bumped it while the script ran.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from netesto.controller import links
from netesto.controller.lab import Lab
from netesto.controller.schedule import flow_id
from netesto.errors import LabError, ScriptError, UsageError
from netesto.script import FileLoader, Interpreter, State, estimate_seconds
from netesto.script.actions import Action, DoClient, DoTcpdump, RemoteAction, SetLink
from netesto.script.store import next_round, read_counter_file, read_script

FlowKey = tuple[int, str, str, int]  # (exp, client short name, server short name, group)


class PlanCounter:
    """The workdir's counter as the run will move it, kept in memory: starts at the file's
    value and, like the file, rounds up (NEXT_COUNTER, END) only once the file exists."""

    def __init__(self, start: int = 0, *, exists: bool = True) -> None:
        self.value = int(start)
        self.exists = exists

    def peek(self) -> int:
        return self.value

    def take(self) -> int:
        self.value += 1
        self.exists = True  # the run writes the file here
        return self.value

    def round_up(self) -> None:
        if self.exists:
            self.value = next_round(self.value)


@dataclass(frozen=True)
class Plan:
    """A script resolved once: its actions, what it left defined, the counter after each action."""

    actions: tuple[Action, ...]
    text: str
    file: str
    defines: Mapping[str, str] = field(default_factory=dict)
    state: State | None = field(default=None, repr=False)
    counter_start: int = 0
    counts: tuple[int, ...] = ()  # the counter once each action was produced
    counter_end: int = 0  # ... and once the script ended

    @property
    def estimate(self) -> float:
        """Seconds the plan takes to run (:func:`netesto.script.estimate_seconds`)."""
        return estimate_seconds(self.actions)

    def run_estimate(self, imported: bool | None = None, seasoned: bool | None = None) -> float:
        """Seconds a run of the plan takes, with what running costs: flows' start lead, connections,
        fetching, processing (:mod:`netesto.controller.estimate`), scaled by what this process's
        earlier runs' costs came to (:func:`~netesto.controller.estimate.learned`); ``imported``: run
        in a process that has processing's modules imported, ``seasoned``: one that has learned the
        hosts' start leads (None: this one, as it is now)."""
        from netesto.controller.estimate import learned

        script = self.estimate
        return script + (self.modelled(imported, seasoned) - script) * learned()

    def modelled(self, imported: bool | None = None, seasoned: bool | None = None) -> float:
        """:meth:`run_estimate` as the cost model alone says, before its costs are scaled by what was learned."""
        from netesto.controller import startlead
        from netesto.controller.estimate import run_seconds, warm

        return run_seconds(self.actions, imported=warm() if imported is None else imported,
                           seasoned=startlead.known() if seasoned is None else seasoned)

    def counted(self, counter_file: Path) -> Iterator[Action]:
        """The actions, writing ``counter_file`` as each one is reached (and at the end)."""
        written = self.counter_start
        for action, value in zip(self.actions, self.counts):
            if value != written:
                write_counter(counter_file, value)
                written = value
            yield action
        if self.counter_end != written:
            write_counter(counter_file, self.counter_end)


def write_counter(path: Path, value: int) -> None:
    """Write the counter file (atomically; a UsageError when it cannot be written)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(f"{value}\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the counter file: {exc.strerror or exc}") from exc


def script_text(script: str | Path, name: str = "<script>") -> tuple[str, str, Path | None]:
    """(text, file name, directory) of a script given as text (called ``name``) or as a path."""
    if isinstance(script, Path) or ("\n" not in script and len(script) < 4096 and Path(script).is_file()):
        path = Path(script)
        return read_script(path), str(path), path.resolve().parent
    return str(script), name, None


def make_plan(
    script: str | Path,
    *,
    name: str = "<script>",
    defines: Mapping[str, str] | None = None,
    state: State | None = None,
    workdir: str | Path = ".",
    host_suffix: str = "",
    counter: int | None = None,
) -> Plan:
    """Resolve ``script`` (text called ``name``, or a file) into its :class:`Plan`.

    SOURCE finds files in the current directory, the script's directory and
    ``workdir``; ``exp=COUNTER`` counts from ``counter``, else from ``workdir``'s
    counter file (which a plan never writes). ``state`` (copied: planning defines
    nothing) starts the script with what earlier scripts defined.
    """
    text, fname, sdir = script_text(script, name)
    wd = Path(workdir)
    search = list(dict.fromkeys(d for d in (Path.cwd(), sdir, wd.resolve()) if d is not None))
    if counter is None:
        count = PlanCounter(read_counter_file(wd / "counter"), exists=(wd / "counter").exists())
    else:
        count = PlanCounter(counter)
    start = count.value
    defs = dict(defines or {})
    interp = Interpreter(loader=FileLoader(list(map(str, search))), counter=count, defines=defs,
                         host_suffix=host_suffix, state=state)
    actions: list[Action] = []
    counts: list[int] = []
    for action in interp.run_text(text, file=fname):
        actions.append(action)
        counts.append(count.value)
    return Plan(actions=tuple(actions), text=text, file=fname, defines=defs, state=interp.state(),
                counter_start=start, counts=tuple(counts),
                counter_end=count.value)


def check_actions(actions: Iterable[Action], lab: Lab) -> None:
    """LabError naming the first host an action uses that the lab does not have;
    ScriptError at a DO_CLIENT whose flow ids another one of its experiment has."""
    pairs: dict[FlowKey, DoClient] = {}
    for a in actions:
        try:
            if isinstance(a, RemoteAction):
                lab.resolve(a.host)
            if isinstance(a, DoClient):
                lab.resolve(a.server)
            if isinstance(a, DoTcpdump) and a.server not in ("X", "x", ""):
                lab.resolve(a.server)
            if isinstance(a, SetLink):
                links.check(lab, a)
        except LabError as exc:
            raise LabError(f"{a.loc}: {exc.message}") from exc  # where the script names it
        if isinstance(a, DoClient):
            check_flow_ids(a, lab, pairs)
            if a.load and not a.bottleneck and not lab.testbed.get("bw"):
                raise ScriptError(f"DO_CLIENT: load={a.load:g} needs the bottleneck's rate: lab {lab.name} has no "
                                  "testbed", file=a.loc.file, line=a.loc.line, column=a.loc.column,
                                  text=a.loc.text, hint="give bottleneck=RATE, e.g. bottleneck=100mbit")


def check_flow_ids(a: DoClient, lab: Lab, pairs: dict[FlowKey, DoClient]) -> None:
    """Two DO_CLIENTs of one experiment with the same lab hosts and group would make the
    same flow ids (h2 and h2.lab are one host): the second would replace the first."""
    client, server = lab.resolve(a.host).short, lab.resolve(a.server).short
    key = (a.exp, client, server, a.group)
    first = pairs.setdefault(key, a)
    if first is not a:
        raise ScriptError(
            f"DO_CLIENT: flows {client}-{server}-{a.group}-* are already in experiment {a.exp} "
            f"(from {first.loc})", file=a.loc.file, line=a.loc.line, column=a.loc.column,
            text=a.loc.text, hint="give one of them another group=N")


def planned_flows(actions: Iterable[Action], lab: Lab) -> list[str]:
    """The flow ids the plan's DO_CLIENTs will start (as the runner names them)."""
    flows: list[str] = []
    for a in actions:
        if isinstance(a, DoClient):
            try:
                client, server = lab.resolve(a.host).name, lab.resolve(a.server).name
            except LabError:
                continue  # the run refuses it with a better message
            flows += [flow_id(client, server, a.group, i) for i in range(a.instances)]
    return list(dict.fromkeys(flows))


__all__ = ["Plan", "PlanCounter", "check_actions", "check_flow_ids", "make_plan", "planned_flows", "script_text",
           "write_counter"]
