"""Small notebooks written for sweep tests (no lab: they run in any kernel)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
          "language_info": {"name": "python"}}


def write(path: Path, parameters: str | None, *body: str) -> Path:
    cells = []
    if parameters is not None:
        cells.append(new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    cells += [new_code_cell(src) for src in body]
    nbformat.write(new_notebook(cells=cells, metadata=KERNEL), path)
    return path
