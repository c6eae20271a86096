"""docs/macro-libraries.md lists every macro's parameters as the BEGIN lines declare them.

The tables between ``<!-- params:FILE -->`` markers are generated from the
libraries; after changing a declaration, rewrite them with
``python -m tests.inlib.test_params_doc --write``.
"""

from __future__ import annotations

import sys

from netesto.script.params import GLOBAL, OPTIONAL, REQUIRED, Param
from netesto.script.parser import Macro, parse

from .planning import REPO

DOC = REPO / "docs" / "macro-libraries.md"
LIBS = ("inlib", "inlib.rateTest", "inlib.vsTest", "inlib.caTest")


def _optional(p: Param) -> str:
    if p.kind == OPTIONAL:
        return f"{p.name} (the global, else unset)"
    if p.kind == GLOBAL:
        return f"{p.name} (the global, else {p.default or 'empty'})"
    return f"{p.name} ({p.default or 'empty'})"


def render(lib: str) -> str:
    """The parameter table of one library file, its macros in file order."""
    path = REPO / "inlib" / lib
    rows = ["| macro | must be given | may be given (default) |", "|---|---|---|"]
    for node in parse(path.read_text(encoding="utf-8"), lib):
        if not isinstance(node, Macro):
            continue
        params = node.params or ()
        assert node.params is not None or not node.uses, f"{node.name} declares no parameters"
        required = ", ".join(p.name for p in params if p.kind == REQUIRED) or "-"
        optional = ", ".join(_optional(p) for p in params if p.kind != REQUIRED) or "-"
        rows.append(f"| `{node.name}` | {required} | {optional} |")
    return "\n".join(rows) + "\n"


def _section(doc: str, lib: str) -> tuple[int, int]:
    start_mark, end_mark = f"<!-- params:{lib} -->\n", f"<!-- /params:{lib} -->"
    start = doc.index(start_mark) + len(start_mark)
    return start, doc.index(end_mark, start)


def test_every_library_macro_has_its_declared_parameters_in_the_doc():
    doc = DOC.read_text(encoding="utf-8")
    for lib in LIBS:
        start, end = _section(doc, lib)
        assert doc[start:end] == render(lib), (
            f"the {lib} table of {DOC.name} is out of date: python -m tests.inlib.test_params_doc --write")


def write() -> None:
    doc = DOC.read_text(encoding="utf-8")
    for lib in LIBS:
        start, end = _section(doc, lib)
        doc = doc[:start] + render(lib) + doc[end:]
    DOC.write_text(doc, encoding="utf-8")


if __name__ == "__main__" and "--write" in sys.argv:
    write()
