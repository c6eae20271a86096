"""What a run hands back: :class:`RunResult` and its :class:`ExperimentResult` s."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from netesto.script.interp import State


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment a run produced."""

    exp: int
    exp_name: str
    path: Path
    hosts: tuple[str, ...]
    flows: tuple[str, ...]
    errors: tuple[str, ...] = ()

    @property
    def dataset(self) -> Any:
        """The experiment's xarray Dataset (needs the results extra)."""
        from netesto.results import open_experiment

        return open_experiment(self.path)

    def plot(self, *variables: str, **options: Any) -> Any:
        """Per-flow time series (goodput, cwnd, RTT by default) as holoviews panels with linked
        time axes; ``netesto.plots.save(res[1].plot(), "flows.html")`` writes them as an offline page."""
        from netesto.plots import timeseries

        return timeseries(self.dataset, variables, **options) if variables else timeseries(self.dataset, **options)

    def _repr_html_(self) -> str:
        from netesto.report.display import experiment_html

        return experiment_html(self.dataset)


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did: experiments, errors, time."""

    workdir: Path
    experiments: tuple[ExperimentResult, ...]
    errors: tuple[str, ...] = ()
    elapsed: float = 0.0
    # Stopped before its end (Ctrl-C, SIGTERM, cancel): what it collected is kept and processed.
    interrupted: bool = False
    # What the script left defined: run(state=...) takes it forward (too long to show).
    state: State | None = field(default=None, repr=False, compare=False)

    @property
    def exps(self) -> list[int]:
        return [e.exp for e in self.experiments]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.interrupted

    def __getitem__(self, exp: int) -> ExperimentResult:
        for e in self.experiments:
            if e.exp == exp:
                return e
        raise KeyError(f"experiment {exp} is not in this run (it ran {self.exps})")

    def _repr_html_(self) -> str:
        from netesto.report.display import run_html

        return run_html(self)


__all__ = ["ExperimentResult", "RunResult"]
