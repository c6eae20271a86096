"""The language's layout: it stays pure (netesto.script imports neither the engine,
the agent, the controller, results, plots nor IPython: DESIGN.md's "never" rules),
has no import circle, and each module opens with a docstring and exports a sorted ``__all__``."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import netesto.script

SCRIPT = Path(netesto.script.__file__).resolve().parent
# What the language may lean on: its own modules, the error tree, the one policy,
# the shared vocabulary, the protocol's name rules and the flow spec's value lists
# (CRR_CLOSES; that module leans on nothing else, checked below), the distributions of drawn
# workloads (netesto.workload: stdlib and the vocabulary, checked below too) and the words of
# changing links (SET_LINK's parameters, shapes and trace files: netesto.linkshape, netesto.linktrace).
ALLOWED = ("netesto.script", "netesto.errors", "netesto.policy", "netesto.vocab", "netesto.protocol.names",
           "netesto.protocol.flowspec", "netesto.workload", "netesto.linkshape", "netesto.linktrace")
NEVER = ("netesto.engine", "netesto.agent", "netesto.controller", "netesto.results", "netesto.plots",
         "netesto.testbed", "netesto.drivers", "netesto.collectors", "IPython", "xarray", "zmq")


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_every_module_of_the_language_imports_only_what_it_may() -> None:
    import netesto.workload
    from netesto.protocol import flowspec

    workload = sorted(Path(netesto.workload.__file__).parent.glob("*.py"))
    for path in [*sorted(SCRIPT.glob("*.py")), Path(flowspec.__file__), *workload]:
        for name in _imports(path):
            if name.startswith("netesto"):
                assert name == "netesto" or name.startswith(ALLOWED), f"{path.name} imports {name}"


def test_importing_the_language_loads_none_of_the_rest() -> None:
    code = "import sys, netesto.script; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    for name in NEVER:
        assert not any(m == name or m.startswith(name + ".") for m in loaded), name


def test_no_import_circle_inside_the_language() -> None:
    graph = {p.stem: {n.rsplit(".", 1)[-1] for n in _imports(p) if n.startswith("netesto.script.")}
             for p in SCRIPT.glob("*.py") if p.stem != "__init__"}
    for p in SCRIPT.glob("*.py"):  # `from netesto.script import local, remote`
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "netesto.script" and p.stem != "__init__":
                graph[p.stem].update(alias.name for alias in node.names)

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join(path + (name,))
        for dep in graph.get(name, ()):
            visit(dep, path + (name,))

    for name in graph:
        visit(name, ())


def test_every_module_says_what_it_is_and_exports_a_sorted_all() -> None:
    for path in sorted(SCRIPT.glob("*.py")):
        module = importlib.import_module(f"netesto.script.{path.stem}" if path.stem != "__init__" else "netesto.script")
        assert module.__doc__ and module.__doc__.strip(), path.name
        exported = getattr(module, "__all__", None)
        assert exported == sorted(exported), path.name
        assert all(hasattr(module, name) for name in exported), path.name
