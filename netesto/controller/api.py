"""The library's entry points: :func:`run` a script on a lab, :func:`run_plan`, :func:`collect`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from netesto.controller.estimate import learn
from netesto.controller.lab import Lab
from netesto.controller.plan import Plan, make_plan
from netesto.controller.progress import ProgressCallback
from netesto.controller.records import make_workdir
from netesto.controller.result import RunResult
from netesto.controller.runner import Runner
from netesto.errors import NetestoError, ScriptError
from netesto.script.interp import State


def run(
    script: str | Path,
    lab: Lab | str | Path,
    workdir: str | Path = ".",
    defines: dict[str, str] | None = None,
    progress: ProgressCallback | None = None,
    *,
    state: State | None = None,
    name: str = "<script>",
    **runner_options: Any,
) -> RunResult:
    """Run a script (text or a file path) on ``lab`` (a Lab or a lab file path).

    Every host the script names is checked against the lab before anything
    runs. Experiment numbers come from ``<workdir>/counter``; data goes to
    ``<workdir>/<exp>/``. Raises the run's first error (an AgentError naming
    the host, a ScriptError, ...) after cleanup; its ``detail`` is the
    :class:`RunResult` when the run got as far as the agents. ``runner_options``
    go to :class:`Runner` (``lead``, ``wait_margin``, ``cancel`` - a
    ``threading.Event`` that, once set, stops the run at its next wait like Ctrl-C).

    ``state`` (a :class:`netesto.script.State`) starts the script with what earlier
    scripts defined (variables, macros, SOURCEd files: a notebook's cells); the
    result's ``state`` is what it holds after this script, also on the RunResult
    of an error's ``detail`` when the run failed at an agent. A ScriptError hands
    back nothing: the caller's state stays as it was. ``name`` is what errors call a
    script given as text (a notebook's ``<cell>``).
    """
    the_lab = lab if isinstance(lab, Lab) else Lab.from_file(lab)
    wd = Path(workdir)
    make_workdir(wd)
    plan = make_plan(script, name=name, defines=defines, state=state, workdir=wd, host_suffix=the_lab.host_suffix)
    return run_plan(plan, the_lab, wd, progress, **runner_options)


def run_plan(
    plan: Plan,
    lab: Lab,
    workdir: str | Path = ".",
    progress: ProgressCallback | None = None,
    **runner_options: Any,
) -> RunResult:
    """Run a :class:`~netesto.controller.plan.Plan` (from :func:`make_plan`) on ``lab``, as :func:`run` does.

    An unknown host or clashing flow ids fail here, before any agent is touched;
    the counter file is written as the run reaches each experiment.
    """
    wd = Path(workdir)
    make_workdir(wd)
    runner = Runner(lab, wd, progress=progress, script=plan.text, defines=dict(plan.defines), **runner_options)
    runner.validate(plan.actions)
    modelled = plan.modelled()
    try:
        result = runner.run(plan.counted(wd / "counter"), planned=plan.actions)
    except NetestoError as exc:
        # What the script defined stays defined when an agent failed; a script
        # error (a clash only the run's own checks see) keeps the caller's state.
        if isinstance(exc.detail, RunResult) and not isinstance(exc, ScriptError):
            exc.detail = replace(exc.detail, state=plan.state)
        raise
    if result.ok:  # a run stopped early or failed says nothing of what running costs
        learn(plan.estimate, modelled, result.elapsed)
    return replace(result, state=plan.state)


def collect(
    lab: Lab | str | Path, workdir: str | Path = ".", progress: ProgressCallback | None = None,
    **runner_options: Any,
) -> RunResult:
    """Fetch the data agents still hold (e.g. after the controller died mid-run) into ``workdir``."""
    the_lab = lab if isinstance(lab, Lab) else Lab.from_file(lab)
    return Runner(the_lab, workdir, progress=progress, **runner_options).collect()


__all__ = ["collect", "run", "run_plan"]
