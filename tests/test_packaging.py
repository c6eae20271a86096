"""The package's shape: listed packages, the export list, light imports."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import netesto

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "netesto").rglob("__init__.py")
    }
    found |= {"netesto.inlib", "netesto.report_templates"}
    assert found == listed


def test_export_list_is_sorted_and_resolvable():
    assert netesto.__all__ == sorted(netesto.__all__)
    assert set(netesto.__all__) == {
        "AgentError", "AgentUnreachable", "Lab", "NetestoError", "ProtocolError", "ResultsError",
        "ScriptError", "Table", "UsageError", "__version__", "combine", "load_ipython_extension",
        "open_experiment", "open_experiments", "open_sweep", "plan", "process_experiment", "run", "sweep",
    }
    for name in netesto.__all__:
        if name != "load_ipython_extension":
            assert getattr(netesto, name) is not None, name


def _imported_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_netesto_is_light():
    mods = _imported_after("import netesto, netesto.errors, netesto.raw.nflow")
    for heavy in ("xarray", "IPython", "bokeh", "holoviews", "pandas", "numpy", "zmq"):
        assert heavy not in mods, heavy


def test_the_agent_and_its_engine_stay_free_of_the_pydata_stack():
    """A lab host runs the agent with pyzmq and msgpack: no xarray, no plotting, no notebook."""
    mods = _imported_after("import netesto.agent.cli, netesto.agent.server, netesto.engine.serve.workers, "
                           "netesto.engine.serve.server, netesto.drivers.iperf3, netesto.drivers.netperf, "
                           "netesto.collectors.ping, netesto.collectors.hoststats")
    for heavy in ("xarray", "IPython", "ipywidgets", "bokeh", "holoviews", "pandas", "numpy", "jinja2"):
        assert heavy not in mods, heavy


def test_the_systemd_unit_starts_the_agent_its_install_lines_install() -> None:
    # The unit hard-coded /usr/local/bin/netesto-agent, where a PEP 668 Debian installs nothing.
    import re

    unit = (Path(__file__).resolve().parents[1] / "contrib" / "netesto-agent.service").read_text()
    venv = re.search(r"python3 -m venv (\S+)", unit).group(1)
    exec_start = re.search(r"^ExecStart=(\S+)", unit, re.M).group(1)
    assert exec_start == f"{venv}/bin/netesto-agent"
    assert f"{venv}/bin/pip install ./netesto-*.whl" in unit  # no package index has netesto: the wheel of a clone
    assert "pip install netesto " not in unit and "pip install netesto\n" not in unit


def test_no_doc_installs_netesto_from_a_package_index() -> None:
    # README and docs/agents.md said `pip install netesto`: no index has it (a clone, or its wheel)
    import re

    for doc in [ROOT / "README.md", ROOT / "contrib" / "netesto-agent.service", *sorted((ROOT / "docs").glob("*.md"))]:
        found = re.findall(r"pip install (?:-[a-zA-Z-]+ )*'?netesto(?:\[[a-z,]+\])?'?(?![-\w./])", doc.read_text())
        assert found == [], f"{doc.name}: {found}"
