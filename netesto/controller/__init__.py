"""The controller: Lab, agent clients, and the runner that executes Actions."""

from netesto.controller.lab import Lab, LabHost, Shape
from netesto.controller.progress import (
    ActionFinished,
    ActionStarted,
    ConsoleProgress,
    DataStored,
    EchoText,
    ExperimentProcessed,
    ExperimentStarted,
    FlowProgress,
    FlowsScheduled,
    HostError,
    Notice,
    NullProgress,
    Progress,
    ProgressEvent,
    RecordingProgress,
    RunFinished,
    RunStarted,
)
from netesto.controller.api import collect, run, run_plan
from netesto.controller.plan import Plan, make_plan
from netesto.controller.result import ExperimentResult, RunResult
from netesto.controller.runner import Runner

__all__ = [
    "ActionFinished",
    "ActionStarted",
    "ConsoleProgress",
    "DataStored",
    "EchoText",
    "ExperimentProcessed",
    "ExperimentResult",
    "ExperimentStarted",
    "FlowProgress",
    "FlowsScheduled",
    "HostError",
    "Lab",
    "LabHost",
    "Notice",
    "NullProgress",
    "Plan",
    "Progress",
    "ProgressEvent",
    "RecordingProgress",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "Runner",
    "Shape",
    "collect",
    "make_plan",
    "run",
    "run_plan",
]
