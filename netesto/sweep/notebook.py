"""A sweep notebook's parameters: its cell tagged ``parameters``, read without a kernel."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Mapping

from netesto.errors import SweepError

# Names the sweep fills in itself when the notebook declares them.
SUPPLIED = ("lab", "workdir", "seed", "rep", "point", "steady")


def parameters_of(path: str | Path) -> dict[str, Any]:
    """``{name: default}`` of the notebook's ``parameters`` cell, defaults as
    Python values where they are literals (else their source text)."""
    import nbformat
    from papermill.translators import PythonTranslator

    p = Path(path)
    try:
        nb = nbformat.read(p, as_version=4)
    except FileNotFoundError:
        raise SweepError(f"{p}: no such notebook") from None
    except (OSError, ValueError) as exc:  # nbformat's read errors are ValueErrors
        raise SweepError(f"{p}: not a readable notebook: {exc}") from exc
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        raise SweepError(f"{p}: no cell tagged 'parameters' (papermill sets the sweep's values after that cell; "
                         "in JupyterLab: the cell's property inspector, Cell Tags, add 'parameters')")
    language = (nb.metadata.get("kernelspec") or {}).get("language") or (nb.metadata.get("language_info") or {}).get("name")
    if language not in (None, "python"):
        raise SweepError(f"{p}: a {language} notebook; sweeps run Python notebooks")
    out: dict[str, Any] = {}
    for param in PythonTranslator.inspect(cells[0]):
        try:
            out[param.name] = ast.literal_eval(param.default)
        except (ValueError, SyntaxError):
            out[param.name] = param.default
    return out


def check_names(path: str | Path, declared: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    """Every swept or fixed name must be a parameter of the notebook, and not one the sweep fills in."""
    mine = [n for n in given if n in SUPPLIED]
    if mine:
        raise SweepError(f"{', '.join(mine)}: set by the sweep itself for each point (the lab comes from "
                         "--lab or --testbed); sweep or fix the notebook's other parameters")
    unknown = [n for n in given if n not in declared]
    if unknown:
        import difflib

        hints = []
        for n in unknown:
            close = difflib.get_close_matches(n, list(declared), n=1)
            hints.append(f"{n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise SweepError(f"{path}: no parameter {', '.join(hints)}; its parameters cell has: "
                         f"{', '.join(declared) or '(none)'}")


__all__ = ["SUPPLIED", "check_names", "parameters_of"]
