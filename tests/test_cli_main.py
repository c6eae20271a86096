"""The top-level ``netesto`` command: no command, a typo'd command, a missing extra."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def netesto(*args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    prog = code + "import sys, netesto.cli; sys.exit(netesto.cli.main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", prog, *args], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_no_command_prints_the_help_and_exits_2() -> None:
    done = netesto()
    assert done.returncode == 2 and "commands:" in done.stderr and "testbed" in done.stderr


def test_a_typo_gets_a_suggestion_and_exit_2() -> None:
    done = netesto("tesbed", "up")
    assert done.returncode == 2
    assert "unknown command 'tesbed'; did you mean 'testbed'?" in done.stderr and "Traceback" not in done.stderr


def test_help_and_version_still_exit_0() -> None:
    assert netesto("--help").returncode == 0 and netesto("--version").stdout.startswith("netesto ")


def test_a_command_whose_extra_is_missing_names_the_extra(tmp_path: Path) -> None:
    # With the light core install (pip install netesto), heavier commands died with a bare
    # ModuleNotFoundError: here the results extra's packages are hidden from the interpreter.
    hide = ("import sys\n"
            "class Hide:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('numpy', 'pandas', 'xarray', 'netCDF4'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Hide())\n")
    script = tmp_path / "t.py"
    script.write_text("Select exp\n")
    done = netesto("table", str(script), "-C", str(tmp_path), code=hide)
    assert done.returncode == 1, done.stdout + done.stderr
    # table needs the report extra whole (its plots too): one install, not results then plots then report
    assert "which this install lacks; the 'report' extra has it:" in done.stderr and "Traceback" not in done.stderr
    assert f"-m pip install -e '{REPO}[report]'" in done.stderr


def _undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """Each parser without a description and each argument without a help text, down the tree."""
    missing = [] if (parser.description or "").strip() else [f"{path}: no description"]
    parser.format_help()  # a stray % in a help text fails here, not when a user asks for it
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not (listed.get(name) or "").strip():
                    missing.append(f"{path} {name}: no help in {path}'s list")
                missing += _undocumented(sub, f"{path} {name}")
        elif action.help != argparse.SUPPRESS and not (action.help or "").strip():
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}: no help")
    return missing


def test_every_command_and_argument_says_what_it_is() -> None:
    # testbed up/down/status, report sweep/index and flow client/server had no description
    from netesto.agent.cli import build_parser
    from netesto.cli import COMMANDS, command_parser

    missing = [m for name in COMMANDS for m in _undocumented(command_parser(name), f"netesto {name}")]
    assert missing + _undocumented(build_parser(), "netesto-agent") == []


def test_flow_help_says_client_takes_flows_from_its_command_line() -> None:
    # `netesto flow --help` said client ran "the flows of a JSON spec file", hiding -H HOST
    out = netesto("flow", "--help").stdout
    client = out.split("\n    client", 1)[1].split("\n\n")[0]
    assert "-H HOST" in client and "--specs" in client, out
