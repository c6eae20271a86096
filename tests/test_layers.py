"""The walls between the packages, read from the source: who may import whom, and how big a room may grow.

The layer picture (DESIGN.md, redrawn by issue 15), highest first::

    magics, commands            the notebook and the command line
    sweep                       papermill over a grid of parameters
    report -> plots -> results  pages, figures, the datasets they draw
    controller                  plans a script, drives agents, fetches data
    testbed                     namespace labs on this machine
    agent -> engine, drivers, collectors
    script                      the language (pure)
    raw, protocol, labfile, policy, vocab, errors   formats, the wire, the shared rules

An import is an edge whether it sits at the top of a module or inside a function:
both tie one file to another. The only upward edges allowed are the presentation
hooks listed in ``PRESENTATION_HOOKS`` (a result that draws itself imports its
plotting code when it is displayed), each named with its reason.

Inside the engine the parts have walls of their own (``ENGINE_WALLS``, see
netesto/engine/__init__.py), its test types import none of each other's
modules (``TEST_TYPES``), and the C files of each extension call one way.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "netesto"

MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _target(name: str) -> str | None:
    """The module of ours that ``name`` (a module or a name in one) resolves to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, int, str | None]]:
    """``(imported module, line, enclosing function or None)`` for each netesto import of ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int, str | None]] = []

    def visit(node: ast.AST, func: str | None, type_only: bool) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            type_only = True  # annotations only: no import at run time
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node.name
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        if not type_only:
            for name in names:
                target = _target(name) if name.startswith("netesto") else None
                if target and target != module:
                    found.append((target, node.lineno, func))
        for child in ast.iter_child_nodes(node):
            visit(child, func, type_only)

    visit(tree, None, False)
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


# (importing module, imported module): why the upward edge is there.
PRESENTATION_HOOKS: dict[tuple[str, str], str] = {
    ("netesto.results.analysis", "netesto.plots.tables"):
        "Table.plot() draws the table an exp.py-style script made, as the original's plot commands did",
    ("netesto.controller.result", "netesto.plots"): "ExperimentResult.plot() draws the experiment it holds",
    ("netesto.controller.result", "netesto.report.display"): "a run's and an experiment's rich repr in a notebook",
    ("netesto.controller.records", "netesto.report.experiment"):
        "PROCESS_EXP writes exp.html beside exp.nc, as the original wrote each experiment's page",
}


@functools.cache
def _edges() -> tuple[tuple[str, str, int, str | None], ...]:
    return tuple((m, t, line, func) for m in MODULES for t, line, func in _imports(m))


def _forbidden(sources: tuple[str, ...], targets: tuple[str, ...]) -> list[str]:
    return [f"{m}:{line} imports {t}" for m, t, line, _ in _edges()
            if _layer(m) in sources and _layer(t) in targets and (m, t) not in PRESENTATION_HOOKS]


RULES = [
    # (who, must not import, why)
    (("netesto.script",), ("netesto.engine", "netesto.agent", "netesto.controller", "netesto.results",
                           "netesto.plots", "netesto.report", "netesto.magics", "netesto.testbed"),
     "the language is pure: text in, actions out"),
    (("netesto.controller",), ("netesto.agent", "netesto.engine", "netesto.drivers", "netesto.collectors",
                               "netesto.testbed"),
     "the controller talks to agents over the wire only, and labs reach it as data"),
    (("netesto.controller",), ("netesto.plots", "netesto.report", "netesto.sweep", "netesto.magics"),
     "the controller runs experiments; what draws or shows them sits above it"),
    (("netesto.results",), ("netesto.engine", "netesto.drivers", "netesto.collectors", "netesto.agent",
                            "netesto.controller", "netesto.plots", "netesto.report", "netesto.sweep",
                            "netesto.testbed", "netesto.script", "netesto.magics"),
     "results read raw files; pages and plots are drawn above them"),
    (("netesto.raw", "netesto.protocol", "netesto.policy", "netesto.vocab", "netesto.errors", "netesto.labfile",
      "netesto.workload"),
     ("netesto.engine", "netesto.drivers", "netesto.collectors", "netesto.agent", "netesto.controller",
      "netesto.results", "netesto.script", "netesto.testbed", "netesto.plots", "netesto.report"),
     "formats and the wire belong to neither side"),
    (("netesto.engine", "netesto.drivers", "netesto.collectors"),
     ("netesto.agent", "netesto.controller", "netesto.results", "netesto.script", "netesto.testbed"),
     "the engine runs flows; it knows nothing of who asked or what is made of its files"),
    (("netesto.drivers",), ("netesto.engine",), "the engine dispatches to drivers, not the reverse"),
    (("netesto.agent",), ("netesto.controller", "netesto.results", "netesto.plots", "netesto.report",
                          "netesto.magics", "netesto.sweep", "netesto.script"),
     "an agent runs what it is told and stays small"),
    (("netesto.plots",), ("netesto.report", "netesto.sweep", "netesto.controller", "netesto.magics"),
     "plots draw results; pages embed plots"),
    (("netesto.report",), ("netesto.sweep", "netesto.controller", "netesto.magics"),
     "a report reads what a sweep recorded, it does not run one"),
    (("netesto.testbed",), ("netesto.controller", "netesto.sweep", "netesto.report", "netesto.magics",
                            "netesto.commands"),
     "a testbed is set up below whoever runs experiments on it"),
]


@pytest.mark.parametrize("sources,targets,why", RULES, ids=[r[0][0].split(".")[-1] + ": " + r[2] for r in RULES])
def test_layers_import_only_downward(sources, targets, why):
    assert _forbidden(sources, targets) == [], why


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                strong(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            strong(node)
    return found


def _graph(key) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for m, t, _, _ in _edges():
        if (m, t) in PRESENTATION_HOOKS:
            continue
        a, b = key(m), key(t)
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph


def test_no_import_circle_between_files():
    assert _cycles(_graph(lambda m: m)) == []


def test_no_import_circle_between_packages():
    assert _cycles(_graph(_layer)) == []


def test_every_presentation_hook_is_a_function_level_import_that_exists():
    function_level = {(m, t) for m, t, _, func in _edges() if func is not None}
    assert set(PRESENTATION_HOOKS) <= function_level


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_rooms_stay_small():
    too_big = []
    for module, path in MODULES.items():
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_big.append(f"{module}: {lines} lines")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    too_big.append(f"{module}.{node.name}: {size} lines")
    for path in sorted([*PACKAGE.rglob("*.c"), *PACKAGE.rglob("*.h")]):  # the C accelerator's files too
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            too_big.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert too_big == []


# The engine's parts, highest first: (part, the other parts it may import, why). A part is the folder below
# netesto/engine/ (``__main__`` the entry point); see netesto/engine/__init__.py.
ENGINE_WALLS = [
    ("__main__", {"serve"}, "the entry point starts the processes"),
    ("serve", {"kinds", "sampling", "core", "native"}, "the processes hand each flow to its test type"),
    ("kinds", {"sampling", "core", "native"}, "a test type runs in a process; it starts none"),
    ("sampling", {"native"}, "sampling and records know no test type and no process"),
    ("core", set(), "the loop, the hello, the load board and the real-time hold stand alone"),
    ("native", set(), "the C loops' faces load the extensions; they know no flow end"),
]
# The bases every test type's ends build on (TCP_STREAM/MAERTS/BIDIR's ends and TCP_CRR's server end live in
# them, with their receivers' low-water mark), and each other test type's modules in netesto/engine/kinds/.
KIND_BASES = {"flowend", "clientrun", "client", "serverflow", "lowat"}
TEST_TYPES = {"TCP_RR": {"client_rr", "server_rr", "rrgroup"}, "TCP_CRR": {"client_crr"},
              "UDP_STREAM, UDP_RR": {"client_udp", "server_udp"},
              "TCP_RR, TCP_CRR drawn": {"workload", "client_wrr", "client_wcrr", "server_wrr"}}


def _engine_part(module: str) -> str | None:
    """``serve``, ``kinds``, ... for a module of the engine; "" for the package itself, None outside it."""
    parts = module.split(".")
    return None if parts[:2] != ["netesto", "engine"] else parts[2] if len(parts) > 2 else ""


def test_every_engine_module_is_in_a_part():
    parts = {part for part, _, _ in ENGINE_WALLS} | {""}
    assert sorted(m for m in MODULES if _engine_part(m) not in (None, *parts)) == []


@pytest.mark.parametrize("part,allowed,why", ENGINE_WALLS, ids=[f"{w[0]}: {w[2]}" for w in ENGINE_WALLS])
def test_engine_parts_import_only_downward(part, allowed, why):
    wrong = [f"{m}:{line} imports {t}" for m, t, line, _ in _edges()
             if _engine_part(m) == part and _engine_part(t) not in (None, part, *allowed)]
    assert wrong == [], why


def test_engine_test_types_import_none_of_each_other():
    kind_of = {name: kind for kind, names in TEST_TYPES.items() for name in names}
    kinds = {m.rpartition(".")[2]: m for m in MODULES if _engine_part(m) == "kinds" and m.count(".") == 3}
    assert sorted(set(kinds) - KIND_BASES - set(kind_of)) == [], "a module of kinds/ not in KIND_BASES or TEST_TYPES"
    wrong = []
    for m, t, line, _ in _edges():
        source, target = m.rpartition(".")[2], t.rpartition(".")[2]
        if m not in kinds.values() or t not in kinds.values() or target in KIND_BASES:
            continue
        if source in KIND_BASES or kind_of[source] != kind_of[target]:
            wrong.append(f"{m}:{line} imports {t}")
    assert wrong == [], "a test type's module imports the bases and its own test type's modules only"


_C_TEXT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.S)  # comments and strings
_C_NAME = re.compile(r"[A-Za-z_]\w*")


def _c_code(path: Path) -> str:
    return _C_TEXT.sub(" ", path.read_text())


def _c_helpers(headers: list[str]) -> dict[str, set[str]]:
    """name -> the names its body uses, for the headers' macros and static inline functions."""
    found: dict[str, set[str]] = {}
    for text in headers:
        for m in re.finditer(r"^#define\s+(\w+)(.*?)(?<!\\)$", text, re.M | re.S):
            found[m.group(1)] = set(_C_NAME.findall(m.group(2)))
        for m in re.finditer(r"^static inline [^;{]*?\b(\w+)\s*\([^;{]*\)\s*\{", text, re.M):
            depth, end = 1, m.end()
            while depth:
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                end += 1
            found[m.group(1)] = set(_C_NAME.findall(text[m.end():end]))
    return found


def c_calls(folder: Path) -> dict[str, set[str]]:
    """Each C file of one extension's folder -> the files whose names (functions, tables, buffers) it uses,
    directly or through a macro or static inline function of its headers (the folder's and the one above)."""
    helpers = _c_helpers([_c_code(h) for h in [*folder.glob("*.h"), *folder.parent.glob("*.h")]])
    code = {c.name: _c_code(c) for c in sorted(folder.glob("*.c"))}
    defined_in: dict[str, str] = {}
    for name, text in code.items():
        for line in text.splitlines():  # a definition at file scope that other files may use: not static
            if re.match(r"[A-Za-z_]", line) and not re.match(r"(typedef|enum|extern|PyDoc_STRVAR)\b|\w+:", line) \
                    and "static" not in line:
                for declarator in re.split(r"[(\[=;{]", line, maxsplit=1)[0].split(","):
                    names = _C_NAME.findall(declarator)  # the type's words, then the name
                    if names:
                        defined_in[names[-1]] = name
    graph: dict[str, set[str]] = {}
    for name, text in code.items():
        used = set(_C_NAME.findall(text))
        todo = list(used & helpers.keys())
        while todo:
            new = helpers[todo.pop()] - used
            used |= new
            todo += new & helpers.keys()
        graph[name] = {defined_in[n] for n in used if defined_in.get(n, name) != name}
    return graph


# one folder per extension, its module in the file named after it (fastloop/_fastloop.c)
C_EXTENSIONS = sorted(p.parent for p in (PACKAGE / "engine" / "native").glob("*/_*.c") if p.stem == f"_{p.parent.name}")


def test_every_folder_of_c_files_is_an_extension_with_its_module_file():
    folders = {p.parent for p in (PACKAGE / "engine" / "native").rglob("*.c")}
    assert folders == set(C_EXTENSIONS) and len(C_EXTENSIONS) == 3


@pytest.mark.parametrize("folder", C_EXTENSIONS, ids=lambda p: p.name)
def test_each_c_extensions_files_call_one_way(folder):
    """The module's file adds what the others lend it; below it the files call one way (no file calls
    back into one that calls it), so each can be read knowing only those below."""
    graph = c_calls(folder)
    assert _cycles(graph) == []
    reached, todo = set(), [f"_{folder.name}.c"]
    while todo:
        for nxt in graph[todo.pop()] - reached:
            reached.add(nxt)
            todo.append(nxt)
    assert reached == set(graph) - {f"_{folder.name}.c"}, "every file of the extension is reached from its module"


def test_c_call_graph_sees_calls_through_header_helpers(tmp_path):
    (tmp_path / "x.h").write_text("#define LOOK(i) table[i]\n"
                                  "static inline int twice(int i)\n{\n    return 2 * LOOK(i);\n}\n")
    (tmp_path / "_x.c").write_text('#include "x.h"\nint table[4]; /* used: b.c */\nint f(void) { return g(); }\n')
    (tmp_path / "b.c").write_text('#include "x.h"\nint g(void) { return twice(1); }  /* "f()" */\n')
    assert c_calls(tmp_path) == {"_x.c": {"b.c"}, "b.c": {"_x.c"}}
    assert _cycles(c_calls(tmp_path)) == [["_x.c", "b.c"]]


def test_only_the_magics_import_ipython():
    """DESIGN: the library returns displayable objects (rich reprs); the magics display them."""
    outside = []
    for module, path in MODULES.items():
        if module.startswith("netesto.magics"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            outside += [f"{module}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in ("IPython", "ipywidgets")]
    assert outside == []
