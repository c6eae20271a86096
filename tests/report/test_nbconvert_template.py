"""`jupyter nbconvert --to html --template netesto-offline` finds netesto's offline template by name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
REMOTE = re.compile(r"""<(?:script|link)[^>]+(?:src|href)=["']https?://""")


def _notebook(where: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# a result\n\n$x^2$ stays text"),
                nbformat.v4.new_code_cell("print('flows: 2')", outputs=[
                    nbformat.v4.new_output("stream", name="stdout", text="flows: 2\n")], execution_count=1)]
    path = where / "nb.ipynb"
    nbformat.write(nb, path)
    return path


def _convert(nb: Path, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--template", "netesto-offline",
                           str(nb)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return nb.with_suffix(".html").read_text()


def test_the_development_install_finds_the_template_by_name(tmp_path: Path) -> None:
    # `make install` links it where nbconvert looks ({sys.prefix}/share/jupyter): an editable install has no data files
    page = _convert(_notebook(tmp_path), dict(os.environ))
    assert "flows: 2" in page and not REMOTE.search(page), REMOTE.findall(page)
    assert "require.js" not in page and "MathJax.js" not in page  # nothing fetched from a CDN


@pytest.mark.slow
def test_the_wheel_installs_the_template_where_nbconvert_looks(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, capture_output=True, env=env, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("netesto-*.whl")
    # a venv of its own: `pip install --prefix` from this one would uninstall this venv's netesto first
    prefix = tmp_path / "host"
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True, env=env, timeout=120)
    subprocess.run([str(prefix / "bin" / "pip"), "install", "--no-deps", "--disable-pip-version-check", "-q", str(wheel)],
                   check=True, capture_output=True, env=env, timeout=300)
    shipped = prefix / "share" / "jupyter" / "nbconvert" / "templates" / "netesto-offline"
    assert sorted(p.name for p in shipped.iterdir()) == ["conf.json", "index.html.j2"]
    # nbconvert looks in {sys.prefix}/share/jupyter of its install; JUPYTER_PATH puts this prefix's before it
    page = _convert(_notebook(tmp_path), {**env, "JUPYTER_PATH": str(prefix / "share" / "jupyter")})
    assert "flows: 2" in page and not REMOTE.search(page)
