"""Helpers for the macro-library tests: plan scripts and group the actions by experiment."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from netesto.script import FileLoader, Interpreter, MemoryCounter
from netesto.script import actions as A

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def run(text: str, *, start: int = 0, defines: dict[str, str] | None = None,
        file: str = "<test>") -> tuple[list[A.Action], Interpreter]:
    """Plan ``text`` with the real file loader; the counter starts at ``start``."""
    interp = Interpreter(loader=FileLoader(), counter=MemoryCounter(start=start),
                         defines=defines)
    return list(interp.run_text(text, file=file)), interp


def plan(text: str, **kw: object) -> list[A.Action]:
    return run(text, **kw)[0]  # type: ignore[arg-type]


@dataclass
class Exp:
    """The actions of one experiment number, in script order."""

    number: int
    actions: list[A.Action] = field(default_factory=list)

    def of(self, kind: type) -> list:
        return [a for a in self.actions if isinstance(a, kind)]

    @property
    def clients(self) -> list[A.DoClient]:
        return self.of(A.DoClient)

    @property
    def starts(self) -> list[A.DoServer]:
        return [a for a in self.of(A.DoServer) if a.order == 0]

    @property
    def ends(self) -> list[A.DoServer]:
        return [a for a in self.of(A.DoServer) if a.order == 1]

    @property
    def fetched(self) -> list[str]:
        return [a.host for a in self.of(A.GetData)]

    @property
    def name(self) -> str:
        names = {a.exp_name for a in self.of(A.DoServer) + self.clients}
        assert len(names) == 1, names
        return names.pop()

    @property
    def processed(self) -> int:
        return len(self.of(A.ProcessExp))

    @property
    def waits(self) -> list[float]:
        return [a.seconds for a in self.of(A.Wait)]


def experiments(actions: list[A.Action]) -> list[Exp]:
    """Split a plan into experiments, each closed by exactly one PROCESS_EXP of its number.

    Local actions (WAIT, RAND_WAIT) belong to the experiment being built; those
    right after a PROCESS_EXP (the closing wait) belong to the one it closed.
    """
    out: list[Exp] = []
    current: list[A.Action] = []
    closed = False
    for action in actions:
        if closed and not hasattr(action, "host"):
            out[-1].actions.append(action)
            continue
        closed = False
        current.append(action)
        if isinstance(action, A.ProcessExp):
            # configuration (SET_SYSCTL, SET_NETEM ...) carries whatever exp came before
            numbers = {a.exp for a in current
                       if isinstance(a, (A.DoServer, A.DoClient, A.GetData, A.DoTcpdump))}
            assert numbers == {action.exp}, (numbers, action.exp)
            out.append(Exp(action.exp, current))
            current, closed = [], True
    assert not [a for a in current if isinstance(a, (A.DoClient, A.DoServer))], "unprocessed experiment"
    return out


def by_exp(actions: list[A.Action]) -> dict[int, list[A.Action]]:
    groups: dict[int, list[A.Action]] = defaultdict(list)
    for action in actions:
        if hasattr(action, "exp"):
            groups[action.exp].append(action)  # type: ignore[attr-defined]
    return dict(groups)


def kinds(actions: list[A.Action]) -> list[str]:
    return [a.kind for a in actions]


__all__ = [
    "DoClient", "DoServer", "DoTcpdump", "EXAMPLES", "Echo", "Exp", "GetData", "ProcessExp",
    "REPO", "RandWait", "Wait", "by_exp", "experiments", "kinds", "plan", "run",
]
