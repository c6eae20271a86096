"""``netesto plan``: print the resolved plan of a script (no network, no processes)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from netesto.errors import UsageError
from netesto.script.estimate import clock

if TYPE_CHECKING:
    from netesto.script.actions import Action


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="script file, or - for stdin")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="VAR=VALUE",
                        help="set a variable before the script runs (repeatable)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON object: actions (Action.to_dict()) and estimate_s")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--counter", type=int, metavar="N",
                       help="pretend the counter file holds N (default: ./counter, else 0)")
    group.add_argument("--workdir", metavar="DIR",
                       help="read the counter file from DIR instead of the current directory")


def _value_text(value: object) -> str:
    """Plan-line text of one argument: pairs as k=v, lists comma-joined."""
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (list, tuple)) and len(v) == 2 for v in value):
            return ";".join(f"{k}={_value_text(v)}" for k, v in value)
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# Shown on every plan line that has them, even at their default value.
ESSENTIAL = frozenset({"exp", "server", "test", "ca", "dur", "instances", "group",
                       "seconds", "low", "high"})
# RR-type tests: the request/reply sizes are essential; other tests ignore them.
_SIZES = ("req", "reply")


def _defaults(action: "Action") -> dict[str, object]:
    return {f.name: f.default for f in dataclasses.fields(action)
            if f.default is not dataclasses.MISSING}


def plan_args(action: "Action") -> list[tuple[str, object]]:
    """The (name, value) pairs a human plan line shows: the essentials and
    every argument that differs from the action's default (``--json`` has all)."""
    data = action.to_dict()
    defaults = _defaults(action)
    rr = "RR" in str(data.get("test", ""))
    out: list[tuple[str, object]] = []
    for key, value in data.items():
        if key in ("action", "loc", "host", "req_text"):
            continue
        if key in _SIZES:
            if rr:
                out.append((key, data.get("req_text", value) if key == "req" else value))
            continue
        if key == "crr_close" and data.get("test") == "TCP_CRR":
            out.append((key, value))  # who closes matters to every CRR flow
            continue
        default = defaults.get(key, dataclasses.MISSING)
        same = (list(default) if isinstance(default, tuple) else default) == value
        if key in ESSENTIAL or not same:
            out.append((key, value))
    return out


def _short_path(file: str) -> str:
    """A file below the current directory as a relative path (library files
    are found by absolute path); anything else unchanged."""
    try:
        return str(Path(file).relative_to(Path.cwd())) if Path(file).is_absolute() else file
    except ValueError:
        return file


def format_action(action: "Action") -> str:
    """One plan line: ``file:line  HOST  KIND key=value ...`` (non-default arguments)."""
    host = getattr(action, "host", "") or "-"
    parts = " ".join(f"{k}={_value_text(v)}" for k, v in plan_args(action))
    return f"{_short_path(action.loc.file)}:{action.loc.line}  {host}  {action.kind} {parts}".rstrip()


def main(args: argparse.Namespace) -> int:
    from netesto.controller.plan import make_plan
    from netesto.script import parse_defines

    # The plan `netesto run` makes: SOURCE looks in the script's directory, the cwd and
    # the workdir; the counter is --counter, else the workdir's counter file (not written).
    workdir = Path(args.workdir or ".")
    if args.script == "-":
        script: str | Path = sys.stdin.read()
    else:
        script = Path(args.script)
        if not script.is_file():
            raise UsageError(f"script {args.script!r} not found")
    plan = make_plan(script, name="<stdin>", defines=parse_defines(args.defines), workdir=workdir,
                     counter=args.counter)
    actions, estimate = list(plan.actions), plan.estimate
    try:
        _print(actions, estimate, plan.run_estimate(imported=False), as_json=args.json)
    except BrokenPipeError:
        # The reader went away (`netesto plan x | head`): stop quietly, like a tool
        # killed by SIGPIPE; stdout goes to /dev/null so the exit-time flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141
    return 0


def _print(actions: "list[Action]", estimate: float, run: float, *, as_json: bool) -> None:
    if as_json:
        json.dump({"actions": [a.to_dict() for a in actions], "estimate_s": estimate, "run_estimate_s": run},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        sys.stdout.flush()
        return
    out = sys.stdout
    for a in actions:
        out.write(format_action(a) + "\n")
    out.write(f"# {len(actions)} actions, estimated wall time {clock(estimate)}"
              f" ({estimate:.1f} s) of waits and flows; a run {clock(run)} ({run:.1f} s) "
              "with its flows' start lead, connections, fetches and processing\n")
    out.flush()
