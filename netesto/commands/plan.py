"""``netesto plan``: print the resolved plan of a script (no network, no processes)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from netesto.errors import UsageError

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


def _defines(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"-D {item!r}: expected VAR=VALUE")
        out[key] = value
    return out


def _format_seconds(secs: float) -> str:
    whole = int(round(secs))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _value_text(value: object) -> str:
    """Plan-line text of one argument: pairs as k=v, lists comma-joined."""
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (list, tuple)) and len(v) == 2 for v in value):
            return ";".join(f"{k}={_value_text(v)}" for k, v in value)  # type: ignore[misc]
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def format_action(action: "Action") -> str:
    """One plan line: ``file:line  HOST  KIND key=value ...``."""
    host = getattr(action, "host", "") or "-"
    parts = []
    for key, value in action.to_dict().items():
        if key in ("action", "loc", "host"):
            continue
        parts.append(f"{key}={_value_text(value)}")
    return f"{action.loc.file}:{action.loc.line}  {host}  {action.kind} {' '.join(parts)}".rstrip()


def main(args: argparse.Namespace) -> int:
    from netesto.script import FileLoader, Interpreter, MemoryCounter, estimate_seconds
    from netesto.script.store import read_counter_file

    if args.counter is not None:
        start = args.counter
    else:
        start = read_counter_file(Path(args.workdir or ".") / "counter")
    interp = Interpreter(loader=FileLoader(), counter=MemoryCounter(start),
                         defines=_defines(args.defines))
    if args.script == "-":
        actions = list(interp.run_text(sys.stdin.read(), file="<stdin>"))
    else:
        path = Path(args.script)
        if not path.is_file():
            raise UsageError(f"script {args.script!r} not found")
        actions = list(interp.run_file(path))
    estimate = estimate_seconds(actions)
    if args.json:
        json.dump({"actions": [a.to_dict() for a in actions], "estimate_s": estimate},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    out = sys.stdout
    for a in actions:
        out.write(format_action(a) + "\n")
    out.write(f"# {len(actions)} actions, estimated wall time {_format_seconds(estimate)}"
              f" ({estimate:.1f} s)\n")
    return 0
