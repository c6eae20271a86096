"""The ``netesto`` command line: a table of subcommands, each in its own module.

Each subcommand module in :mod:`netesto.commands` defines
``add_arguments(parser)`` and ``main(args) -> int``; it is imported only when
its command runs, so ``netesto plan`` never pays for xarray or zmq.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from typing import Any, Sequence

from netesto._version import __version__
from netesto.errors import NetestoError, RunInterrupted, ScriptError

# name -> (module, one-line help, the extra it needs: "" for the core). Order is the order shown by --help.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("netesto.commands.demo", "bring up a testbed, run a two-flow experiment, report", ""),
    "plan": ("netesto.commands.plan", "print the resolved plan of a script (no network)", ""),
    "run": ("netesto.commands.run", "run a script on a lab of netesto-agents", ""),
    "testbed": ("netesto.commands.testbed", "a lab on this machine: up, down, status", ""),
    "flow": ("netesto.commands.flow", "run the built-in flow engine without agents", ""),
    "keys": ("netesto.commands.keys", "create CURVE key pairs for agents and controllers", ""),
    "table": ("netesto.commands.table", "run an exp.py-style table/plot script over exp.csv", "report"),
    "sweep": ("netesto.commands.sweep", "run a notebook once per point of a parameter grid (papermill)", "sweep"),
    "report": ("netesto.commands.report", "HTML reports: a sweep, two sweeps compared, a workdir's index", "report"),
}


def _top_parser() -> argparse.ArgumentParser:
    lines = [f"  {name:<9} {text}" for name, (_, text, _) in COMMANDS.items()]
    parser = argparse.ArgumentParser(
        prog="netesto",
        description="Multi-host TCP experiments: the Netesto script language, agents, results.",
        epilog="commands:\n" + "\n".join(lines) + "\n\n'netesto COMMAND --help' for details.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"netesto {__version__}")
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND")
    return parser


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``netesto NAME`` (imports the command's module)."""
    module_name, text, _ = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"netesto {name}", description=text)
    importlib.import_module(module_name).add_arguments(parser)
    return parser


def missing_extra(exc: ModuleNotFoundError, command: str = "") -> str | None:
    """What installs the module ``exc`` says is missing (the extra ``command`` needs, when that
    has it), from pyproject's extras; None if no extra of ours has it."""
    from netesto.extras import install_hint

    needs = COMMANDS[command][2] if command in COMMANDS else None
    return install_hint(exc.name or "", needs or None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser()
    if not argv:
        top.print_help(sys.stderr)
        return 2
    if argv[0].startswith("-"):
        top.parse_args(argv)  # --help, --version (exit 0) or an unknown option (exit 2)
        return 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, list(COMMANDS), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        print(f"netesto: unknown command {name!r}{hint}\ncommands: {', '.join(COMMANDS)}  "
              "('netesto --help' says what each does)", file=sys.stderr)
        return 2
    try:
        args = command_parser(name).parse_args(rest)
        return _run(name, importlib.import_module(COMMANDS[name][0]), args)
    except ModuleNotFoundError as exc:
        fix = missing_extra(exc, name)
        if fix is None:
            raise
        print(f"netesto {name}: needs {exc.name}, which this install lacks; {fix}", file=sys.stderr)
        return 1


def _run(name: str, module: Any, args: argparse.Namespace) -> int:
    try:
        return int(module.main(args) or 0)
    except NetestoError as exc:
        text = exc.format_message()
        # a script error already starts "file:line:col: error:", as compilers print them
        located = isinstance(exc, ScriptError) and exc.line > 0
        if located:
            print(text, file=sys.stderr)
        else:  # an interrupted run is no error of the user's: "netesto run: interrupted: ..."
            print(f"netesto {name}: {'' if isinstance(exc, RunInterrupted) else 'error: '}{text}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"netesto {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
