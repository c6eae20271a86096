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
    NullProgress,
    Progress,
    ProgressEvent,
    RecordingProgress,
    RunFinished,
    RunStarted,
)
from netesto.controller.runner import ExperimentResult, RunResult, Runner, collect, run

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
    "NullProgress",
    "Progress",
    "ProgressEvent",
    "RecordingProgress",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "Runner",
    "Shape",
    "collect",
    "run",
]
