"""The quickstart in a real JupyterLab, driven by chromium: it runs, saves small, reopens drawn.

This is the route users take: JupyterLab's own output renderers, its widget manager with
jupyter_bokeh's extension, its notebook trust. The server is local, and every request that
would leave the machine is refused and counted as an error (labs are offline).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import netns
from tests.plots.browser import DOCUMENTS

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

# What the open notebook's page draws: bokeh's documents and their figures' titles.
_DRAWN = """() => window.Bokeh === undefined ? null : {docs: Bokeh.documents.length,
  titles: Bokeh.documents.flatMap(d => [...d.all_models]).filter(m => m.constructor.__name__ === 'Figure')
    .map(f => f.title ? f.title.text : '')}"""
_PANEL = "() => window.jupyterapp && jupyterapp.shell.currentWidget && jupyterapp.shell.currentWidget.context"
_IDLE = """() => { const w = jupyterapp.shell.currentWidget, k = w.sessionContext.session && w.sessionContext.session.kernel;
  return k && k.status === 'idle' && w.content.widgets.filter(c => c.model.type === 'code')
    .every(c => c.model.executionCount !== null) }"""


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """A JupyterLab server, and the chromium to open it with.

    As root, chromium runs in a namespace of its own (:func:`tests.netns.private_link`), reaching the
    server over that namespace's one link: chromium fails every request in flight with
    ERR_NETWORK_CHANGED when an address comes or goes where it runs, and the suite's other workers bring
    testbeds up and down in the initial namespace all the time (the server and its kernels stay there,
    where a testbed's global settings can be made). Without root, both are on loopback."""

    base: str
    token: str
    chromium: str
    root: Path  # the directory it serves

    def http(self, path: str, method: str = "GET") -> bytes:
        """``path`` of the server, with the token."""
        url = f"{self.base}{path}{'&' if '?' in path else '?'}token={self.token}"
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as reply:
            return reply.read()


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory):
    """A :class:`LabServer` serving a directory of its own, for the module's tests (each opens notebooks
    of its own names): a JupyterLab server's start took 4 s of CPU."""
    tmp_path = tmp_path_factory.mktemp("lab")
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (the test extra has it)")
    pytest.importorskip("playwright.sync_api")
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("Debian's chromium is not installed")
    link = netns.private_link() if netns.netns_available() else None
    if link:
        wrapper = tmp_path / "chromium-in-ns"
        wrapper.write_text(f"#!/bin/sh\nexec ip netns exec {link.ns} {exe} \"$@\"\n")
        wrapper.chmod(0o755)
        exe = str(wrapper)
    addr = link.addr if link else "127.0.0.1"
    port, token = _free_port(addr), secrets.token_hex(16)
    server = LabServer(f"http://{addr}:{port}", token, exe, tmp_path)
    log = (tmp_path / "jupyterlab.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--ip={addr}", f"--port={port}",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={tmp_path}", "--LabApp.expose_app_in_browser=True",
         "--ServerApp.port_retries=0"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter-config")})
    try:
        deadline = time.monotonic() + 120  # its start, beside the suite's other workers
        while True:
            try:
                server.http("/api/status")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "jupyterlab.log").read_text()
                time.sleep(0.3)
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the kernels it started
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        if link:
            netns.delete_ns(link.ns)


def _open(browser, server: LabServer, url: str, errors: list[str]):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    local = (server.base, "data:", "blob:")
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(local)
               else (errors.append(f"network: {r.request.url}"), r.abort()))
    page.goto(url, timeout=120_000)
    page.wait_for_function(_PANEL, timeout=180_000)  # JupyterLab's first load, beside the suite's other workers
    return page


@pytest.mark.slow
@pytest.mark.netns
def test_the_quickstart_runs_in_jupyterlab_saves_small_and_reopens_drawn(lab_server) -> None:
    from netesto.testbed.lifecycle import down, status

    pw = pytest.importorskip("playwright.sync_api")
    base, token = lab_server.base, lab_server.token
    shutil.copy(NOTEBOOKS / "quickstart.ipynb", lab_server.root / "quickstart.ipynb")
    before = {st["name"] for st in status()}
    url = f"{base}/lab/tree/quickstart.ipynb?token={token}&reset"
    errors: list[str] = []
    try:
        with pw.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=lab_server.chromium, args=["--no-sandbox"])
            try:
                page = _open(browser, lab_server, url, errors)
                page.wait_for_function("() => jupyterapp.shell.currentWidget.sessionContext.session"
                                       " && jupyterapp.shell.currentWidget.sessionContext.session.kernel", timeout=120_000)
                page.evaluate("() => jupyterapp.commands.execute('notebook:run-all-cells')")
                page.wait_for_timeout(2000)
                page.wait_for_function(_IDLE, timeout=300_000, polling=500)
                page.wait_for_timeout(2000)  # the last outputs draw
                live = page.evaluate(_DRAWN)
                run = page.evaluate("() => [...document.querySelectorAll('.netesto-run')].map(e => e.innerText)")
                page.evaluate("() => jupyterapp.commands.execute('docmanager:save')")
                page.wait_for_function("() => !jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
                page.close()
                # the kernel gone, as after a restart or on another day: the saved outputs alone
                for k in json.loads(lab_server.http("/api/kernels")):
                    lab_server.http(f"/api/kernels/{k['id']}", method="DELETE")
                reopened_errors: list[str] = []
                again = _open(browser, lab_server, url, reopened_errors)
                again.wait_for_function("() => window.Bokeh && Bokeh.documents.length >= 3", timeout=30_000)
                again.wait_for_timeout(1000)
                reopened = again.evaluate(_DRAWN)
                text = again.evaluate("() => document.body.innerText")
            finally:
                browser.close()
    finally:
        # the notebook's own (own_name("q")), if it failed before its end; never the testbeds other tests
        # brought up meanwhile beside this one (a parallel worker's testbed vanished under its flows)
        for name in {st["name"] for st in status()} - before:
            if name.startswith("q"):
                down(name)
    assert errors == [], errors
    # the live view's snapshot took its place: status, hosts, log; its last plot, the run's and show()'s
    assert len(run) == 1 and "done in" in run[0] and "experiment 1 processed" in run[0], run
    assert {"goodput per flow", "Goodput (200 ms mean)", "Delivery rate"} <= set(live["titles"]), live
    saved = (lab_server.root / "quickstart.ipynb").read_text()
    assert saved.count("BEGIN bokeh.min.js") == 1  # BokehJS once in the notebook
    assert "application/vnd.jupyter.widget-view+json" not in saved  # no dead widget to reopen
    assert len(saved.encode()) < 2_000_000, len(saved.encode())
    assert reopened_errors == [], reopened_errors
    assert reopened["docs"] == 3 and {"goodput per flow", "Goodput (200 ms mean)", "Delivery rate"} <= set(
        reopened["titles"]), reopened
    assert "model not found" not in text and "done in" in text


# The lines of the page's bokeh documents (holoviews' own display puts its BokehJS beside netesto's):
# how many points each glyph renderer holds.
_LINES = ("() => " + DOCUMENTS + ".flatMap(d => [...d.all_models]).filter(m => m.constructor.__name__ === 'GlyphRenderer')"
          + ".map(r => r.data_source.get_length())")
# The page's Bokeh instances (the global one and any by version), each one's documents and their roots,
# and each widget output's bokeh roots: which of them a plot that never showed is missing from.
_BOKEH_STATE = """() => ({global: typeof window.Bokeh === 'undefined' ? null : window.Bokeh.version,
  versions: window.Bokeh ? Object.keys(window.Bokeh).filter(k => /^[0-9]/.test(k)) : [],
  documents: """ + DOCUMENTS + """.map(d => d.roots().length),
  widgets: [...document.querySelectorAll('.jp-OutputArea-output.lm-Widget')].map(e => e.innerHTML.length)})"""
_LIVE_CELLS = [
    "import threading, time\n"
    "from netesto.controller.live import Sample\n"
    "from netesto.plots.livedata import LiveData\n"
    "data = LiveData()\n"
    "data.add([Sample('a', 'h2', 0.0, 1e7), Sample('b', 'h2', 0.0, 2e7)])\n"
    "def feed():  # samples arriving as a run's do, after the cell ended\n"
    "    for i in range(1, 41):\n"
    "        time.sleep(0.25)\n"
    "        try:\n"
    "            data.add([Sample('a', 'h2', i / 4, 1e7 + i * 1e5), Sample('b', 'h2', i / 4, 2e7)])\n"
    "        except Exception:\n"
    "            import traceback; open('feed-error.txt', 'a').write(traceback.format_exc())\n"
    "threading.Thread(target=feed, daemon=True).start()\n"
    "data.holoviews('goodput') * hv.HLine(15)",
]


@pytest.mark.slow
@pytest.mark.parametrize("first", ["%load_ext netesto\nimport holoviews as hv",
                                   "%load_ext netesto\nimport holoviews as hv\nhv.extension('bokeh')"],
                         ids=["netesto", "hv.extension"])
def test_a_kept_live_dynamicmap_redraws_in_jupyterlab_as_samples_come(lab_server, first: str, request) -> None:
    """The live samples' DynamicMap, composed by the user and shown as a cell's result, follows samples that
    come after its cell ended, offline (no request leaves the page), with BokehJS from netesto or from
    holoviews' extension."""
    import nbformat

    pw = pytest.importorskip("playwright.sync_api")
    base, token = lab_server.base, lab_server.token
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in [first, *_LIVE_CELLS]], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})  # no kernel dialog
    here = lab_server.root / f"live-{request.node.callspec.id}"  # the kernel's directory, one per case
    here.mkdir()
    nbformat.write(nb, here / "live.ipynb")
    errors: list[str] = []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab_server.chromium, args=["--no-sandbox"])
        try:
            page = _open(browser, lab_server, f"{base}/lab/tree/{here.name}/live.ipynb?token={token}&reset", errors)
            page.wait_for_function("() => jupyterapp.shell.currentWidget.sessionContext.session"
                                   " && jupyterapp.shell.currentWidget.sessionContext.session.kernel", timeout=120_000)
            page.evaluate("() => jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_timeout(1000)
            page.wait_for_function(_IDLE, timeout=120_000, polling=250)
            seen = []  # the lines' lengths, every 250 ms, until both flows have every sample (or 60 s)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and sum(n >= 41 for n in (seen[-1] if seen else [])) < 2:
                seen.append(page.evaluate(_LINES))
                page.wait_for_timeout(250)
            text = page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                                 ".map(e => e.className + ': ' + e.innerText.slice(0, 300)).join(' | ')")
            bokeh = page.evaluate(_BOKEH_STATE)  # what the page's BokehJS holds, should no line show
        finally:
            browser.close()
    failed = here / "feed-error.txt"
    assert not failed.exists(), failed.read_text()  # a redraw raised in the thread that sent the samples
    drawn = [lines for lines in seen if sum(n > 0 for n in lines) >= 2]
    assert drawn, (seen[-5:], errors, text[-2000:], bokeh)
    early, last = drawn[0], seen[-1]
    assert errors == [], errors
    assert sorted(n for n in early if n > 0)[-2:] < [41, 41], early  # drawn before the samples were all in
    assert sorted(last)[-2:] == [41, 41], last  # both flows' lines, every sample, redrawn in the page
