"""%%netesto in a real kernel (jupyter_client, nbclient) on a real testbed: interrupts, failures."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .kernel import Kernel, click, kernel_manager

_names = itertools.count(1)
WMEM = "4096 131072 6291456"  # what SET_SYSCTL below changes; a fresh namespace has the kernel default

STREAM = """\
SOURCE inlib
RUN InlibShortWaits
{extra}RUN OneFlowStream server=h1 client=h2 ca={ca} dur=$dur expName=kernel
"""


# A flow that fails after it started: its client tool dies of a signal mid-run. An unknown congestion
# control no longer serves, it is refused before anything runs (tests/controller/test_refuse_early.py).
CRASH = """\
SOURCE inlib
RUN InlibShortWaits
BEGIN CrashingFlow dur
DO_SERVER host=h1 exp=COUNTER start=1
DO_CLIENT host=h2 server=h1 test=TCP_STREAM ca=cubic dur=$dur driver=iperf3
GET_DATA host=h1
GET_DATA host=h2
END CrashingFlow
RUN CrashingFlow dur=$dur
"""

# what the testbed's agents find as iperf3: the real server; a client that crashes half a second in
CRASHING_IPERF3 = """\
#!/bin/sh
case " $* " in *" -s "*) exec {real} "$@";; esac
sleep 0.5
echo "iperf3 stand-in: crashing on purpose" >&2
kill -SEGV $$
"""


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    from netesto.testbed.lifecycle import TestbedConfig, down, up

    where = tmp_path_factory.mktemp("kbed")
    real = shutil.which("iperf3")
    assert real, "these tests need iperf3 (apt-get install iperf3)"
    (where / "bin").mkdir()
    (where / "bin" / "iperf3").write_text(CRASHING_IPERF3.format(real=real))
    (where / "bin" / "iperf3").chmod(0o755)
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{where / 'bin'}{os.pathsep}{path}"  # the agents started now inherit it
    try:
        tb = up(TestbedConfig.parse(name=f"k{os.getpid() % 100000}x{next(_names)}", hosts=2, rtt="10ms",
                                    bw="100mbit", dir=where))
    finally:
        os.environ["PATH"] = path
    try:
        yield tb
    finally:
        down(tb.name)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory, testbed):
    where = tmp_path_factory.mktemp("kernel")
    k = Kernel(where)
    try:
        ex = k.execute(f"%load_ext netesto\n%netesto lab {testbed.lab}\n")
        assert ex.status == "ok", ex.reply
        yield k
    finally:
        k.close()


def _wmem(testbed) -> str:
    out = subprocess.run(["ip", "netns", "exec", f"{testbed.name}-h2", "cat", "/proc/sys/net/ipv4/tcp_wmem"],
                         capture_output=True, text=True, check=True).stdout
    return " ".join(out.split())


def _agents_idle(testbed) -> dict[str, tuple[list[str], list[str]]]:
    """Per host: (experiments it still holds, flows of experiment 1 still running)."""
    from netesto.controller import Lab
    from netesto.controller.session import default_client_factory

    lab = Lab.from_file(testbed.lab)
    seen = {}
    for name in ("h1", "h2"):
        client = default_client_factory(lab.resolve(name), lab)
        try:
            held = list(client.hello().unfetched)
            seen[name] = (held, list(client.status(1).running))
        finally:
            client.close()
    return seen


def _flows_running(msg_type: str, content: dict) -> bool:
    """The progress view says the flows run (its status line or the live view's host status)."""
    state = content.get("data", {}).get("state", {}) if msg_type == "comm_msg" else {}
    return "flow(s) running" in str(state.get("value", "")) or "flow running" in str(state.get("value", ""))


def test_interrupting_a_cell_ends_it_in_one_line_with_the_partial_result_bound(kernel, testbed, tmp_path):
    netns = testbed.mode == "netns"
    before = _wmem(testbed) if netns else ""
    extra = "SET_SYSCTL host=h2 net.ipv4.tcp_wmem=4096,131072,6291456\n" if netns else ""
    work = tmp_path / "res"
    cell = f"%%netesto -D dur=5 --workdir {work} --as res\n" + STREAM.format(extra=extra, ca="cubic")
    ex = kernel.execute(cell, interrupt_after=1.5, interrupt_when=_flows_running, timeout=60)

    assert ex.status == "error" and ex.reply["ename"] == "CellInterrupted"
    errors = ex.of("error")
    assert len(errors) == 1
    shown = errors[0][1]["traceback"]
    assert len(shown) == 1 and "\n" not in shown[0]  # one line, no traceback
    assert "interrupted" in shown[0] and str(work) in shown[0] and "`res`" in shown[0]
    stderr = ex.stream("stderr")
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert "netesto results: warning" not in stderr  # the stopped flows' files are expected to end early
    assert ex.messages[-1][0] - ex.interrupted_at < 15  # stopped, fetched and restored promptly

    # The widget says so (it used to stay at "1 flow(s) running").
    states = [s for _, s in ex.widget_states()]
    assert {"bar_style": "warning"} in states
    assert any(str(s.get("value", "")).startswith("interrupted after") for s in states)

    res = kernel.value("dict(interrupted=res.interrupted, exps=res.exps, errors=list(res.errors))")
    assert res == {"interrupted": True, "exps": [1], "errors": []}  # its own stop is no flow failure
    exp = work / "1"
    assert (exp / "flows" / "h2-h1-1-0.client.nflow").is_file()
    assert json.loads((exp / "experiment.json").read_text())["interrupted"] is True
    assert (exp / "exp.nc").is_file()  # the partial experiment was processed
    assert _agents_idle(testbed) == {"h1": ([], []), "h2": ([], [])}  # nothing left unfetched or running
    if netns:
        assert WMEM != before and _wmem(testbed) == before  # the sysctl is restored

    again = kernel.execute(f"%%netesto -D dur=1 --workdir {work} --as res\n" + STREAM.format(extra="", ca="cubic"))
    assert again.status == "ok", again.reply
    assert "holds unfetched data" not in again.stream("stdout") + again.stream("stderr")
    assert kernel.value("res.ok") is True


def test_a_second_interrupt_during_the_cleanup_does_not_cut_it_short(kernel, testbed, tmp_path):
    work = tmp_path / "res"
    cell = f"%%netesto -D dur=5 --workdir {work} --as res\n" + STREAM.format(extra="", ca="cubic")
    ex = kernel.execute(cell, interrupt_after=1.5, interrupt_when=_flows_running, again_after=0.3, timeout=60)
    assert ex.interrupted_again
    logs = [str(s.get("value", "")) for _, s in ex.widget_states()]
    assert any("restoring the hosts, please wait" in v for v in logs)  # it landed in the cleanup, which went on
    assert ex.status == "error" and ex.reply["ename"] == "CellInterrupted"
    assert [len(c["traceback"]) for _, c in ex.of("error")] == [1]
    assert "Traceback" not in ex.stream("stderr"), ex.stream("stderr")
    assert kernel.value("res.interrupted") is True
    assert json.loads((work / "1" / "experiment.json").read_text())["interrupted"] is True
    assert _agents_idle(testbed) == {"h1": ([], []), "h2": ([], [])}


def test_a_failed_flow_fails_the_cell_after_storing_the_data(kernel, testbed, tmp_path):
    work = tmp_path / "res"
    cell = f"%%netesto -D dur=2 --workdir {work} --as bad\n" + CRASH
    ex = kernel.execute(cell)
    assert ex.status == "error"
    said = ex.stream("stderr")
    assert "Traceback" not in said and said.count("crashing on purpose") == 1, said  # the reason, once
    # the user's line first (the RUN in the cell), then the macro's line
    assert "run failed: <cell>:9 (RUN CrashingFlow) > <cell>:5: h2: flow h2-h1-1-0 of experiment 1 failed" in said, said
    kept = kernel.value("dict(ok=bad.ok, exps=bad.exps)")
    assert kept == {"ok": False, "exps": [1]}
    assert "crashing on purpose" in " ".join(json.loads((work / "1" / "experiment.json").read_text())["errors"])


def test_nbclient_sees_the_failed_cell_and_stops(testbed, tmp_path):
    # papermill runs notebooks through nbclient: a failed run must stop the notebook there.
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"%load_ext netesto\n%netesto lab {testbed.lab}\n%netesto workdir {tmp_path / 'w'}"),
        nbformat.v4.new_code_cell("%%netesto -D dur=2\n" + CRASH),
        nbformat.v4.new_code_cell("after = 1"),
    ]
    client = NotebookClient(nb, timeout=120, km=kernel_manager(tmp_path), resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError, match="crashing on purpose"):
        client.execute()
    assert nb.cells[2].get("execution_count") is None  # the cell after the failed one never ran
    assert (tmp_path / "w" / "1" / "experiment.json").is_file()


def _plot_patches(ex) -> list[tuple[float, list[dict]]]:
    """(arrival, bokeh document events) of each PATCH-DOC a BokehModel widget sent."""
    out = []
    for t, c in ex.of("comm_msg"):
        content = c["data"].get("content") if c["data"].get("method") == "custom" else None
        if isinstance(content, dict) and content.get("msg") == "patch" and '"events"' in content.get("payload", ""):
            out.append((t, json.loads(content["payload"])["events"]))
    return out


def test_the_live_view_draws_every_flow_at_least_once_a_second(kernel, testbed, tmp_path):
    cell = (f"%%netesto -D dur=5 --workdir {tmp_path / 'res'} --as live\n"
            + STREAM.format(extra="", ca="cubic").replace("expName=kernel", "expName=kernel instances=2"))
    ex = kernel.execute(cell)  # a front end that allows input: "auto" is the live view
    assert ex.status == "ok", ex.reply
    bundles = [json.dumps(c["data"]["state"]["render_bundle"]) for _, c in ex.of("comm_open")
               if c["data"]["state"].get("_model_name") == "BokehModel"]
    assert len(bundles) == 1
    assert "h2-h1-1-0" in bundles[0] and "h2-h1-1-1" in bundles[0]  # the planned flows' lines, drawn before the run

    patches = _plot_patches(ex)
    streamed = [(t, e) for t, events in patches for e in events if e["kind"] == "ColumnsStreamed"]
    flows = {dict(e["data"]["entries"])["flow"][0] for _, e in streamed}
    assert flows == {"h2-h1-1-0", "h2-h1-1-1"}
    values = [y for _, e in streamed for y in dict(e["data"]["entries"])["y"]]
    assert len(values) >= 2 * 2 * 3  # two flows, goodput and cwnd, at least 3 s of samples
    assert sorted(values)[len(values) // 2] > 1  # Mbit/s and packets of real flows
    shown = [e for _, events in patches for e in events if e["kind"] == "ModelChanged" and e["attr"] == "visible"]
    assert [e["new"] for e in shown] == [True]  # the cwnd panel: the agents' progress events carry cwnd
    assert max(sum(e["kind"] == "ColumnsStreamed" for e in events) for _, events in patches) >= 4  # one patch a redraw
    first, last = streamed[0][0], streamed[-1][0]
    assert last - first >= 3
    during = [t for t, _ in patches if first <= t <= last]
    gaps = [b - a for a, b in zip(during, during[1:])]
    assert max(gaps) <= 1.0, gaps  # the plot moves at least once a second while the flows run

    texts = [str(s.get("value", "")) for _, s in ex.widget_states()]
    assert any("2 flows running" in v for v in texts)  # per-host status
    assert any(v.rstrip().endswith("s left") for v in texts)  # time left
    assert any(v.startswith("done in") for v in texts)

    # when the run is over a static snapshot takes the view's place (a saved notebook reopens with it)
    # and the view's widgets are closed: no "model not found" after a restart, no VBox(...) in exports
    (view_id,) = [c["transient"]["display_id"] for _, c in ex.of("display_data")
                  if c.get("transient", {}).get("display_id")]
    (snap,) = [c["data"] for _, c in ex.of("update_display_data") if c["transient"]["display_id"] == view_id]
    page = snap["text/html"]
    assert "done in" in page and "experiment 1 kernel" in page and "data-root-id" in page  # status, log, plot
    assert "BEGIN bokeh.min.js" not in page and "h2-h1-1-1" in page  # drawn by the BokehJS carried before
    assert snap["text/plain"].startswith("netesto: done in") and "experiment 1 kernel" in snap["text/plain"]
    opened = {c["comm_id"] for _, c in ex.of("comm_open")}
    assert opened and opened <= {c["comm_id"] for _, c in ex.of("comm_close")}


def test_a_kernel_learns_what_its_runs_cost_and_not_from_a_stopped_one(kernel, testbed, tmp_path):
    assert kernel.execute("from netesto.controller import estimate as _estimate; _estimate.forget()").status == "ok"
    history = "list(_estimate.{})"
    cell = f"%%netesto -D dur=1 --workdir {tmp_path / 'res'} --as learnt\n" + STREAM.format(extra="", ca="cubic")
    assert kernel.execute(cell, allow_stdin=False).status == "ok"
    ((cost, seen),) = kernel.value(history.format("_HISTORY"))
    elapsed = kernel.value("learnt.elapsed")
    assert 0 < seen <= elapsed and cost > 0  # what running cost beyond the script's own time, and its model
    stopped = f"%%netesto -D dur=5 --workdir {tmp_path / 'stop'} --as cut\n" + STREAM.format(extra="", ca="cubic")
    ex = kernel.execute(stopped, interrupt_after=1.5, interrupt_when=_flows_running, timeout=60)
    assert ex.status == "error" and ex.reply["ename"] == "CellInterrupted"
    assert len(kernel.value(history.format("_HISTORY"))) == 1  # an interrupted run teaches nothing


def test_without_a_widget_front_end_the_cell_prints_progress_lines(kernel, testbed, tmp_path):
    # nbclient (papermill, nbconvert) executes with allow_stdin off and shows no live widget.
    cell = f"%%netesto -D dur=4 --workdir {tmp_path / 'res'} --as txt\n" + STREAM.format(extra="", ca="cubic")
    ex = kernel.execute(cell, allow_stdin=False)
    assert ex.status == "ok", ex.reply
    assert not ex.of("comm_open")
    lines = [(t, line) for t, c in ex.of("stream") if c["name"] == "stdout"
             for line in c["text"].splitlines() if "goodput h2-h1-1-0" in line]
    assert len(lines) >= 3, ex.stream("stdout")
    assert all("Mbit/s" in line and "s left" in line and "h2: 1 flow running" in line for _, line in lines)
    assert "done in" in ex.stream("stdout")


def _wait_flows_running(kernel, timeout: float = 30) -> None:
    """Until a background run's view says its flows run (its start lead is longer on a loaded machine)."""
    deadline = time.time() + timeout
    while True:
        msg = kernel.kc.get_iopub_msg(timeout=max(0.1, deadline - time.time()))
        if _flows_running(msg["msg_type"], msg["content"]):
            return


def test_a_background_cell_returns_at_once_and_its_stop_button_works_while_the_kernel_is_idle(kernel, testbed,
                                                                                              tmp_path):
    work = tmp_path / "res"
    cell = f"%%netesto --background -D dur=6 --workdir {work} --as bg\n" + STREAM.format(extra="", ca="cubic")
    ex = kernel.execute(cell)
    assert ex.status == "ok", ex.reply
    assert ex.messages[-1][0] < 5  # the cell ended long before its 6 s flow
    assert "`bg.wait()`" in ex.stream("stdout")
    buttons = [c["comm_id"] for _, c in ex.of("comm_open") if c["data"]["state"].get("_model_name") == "ButtonModel"]
    assert len(buttons) == 1
    assert kernel.value("bg.done") is False  # the kernel is idle, the run goes on
    _wait_flows_running(kernel)
    time.sleep(1)
    # its samples, as holoviews data the user keeps while the run goes on
    before = kernel.value("len(bg.live)")
    time.sleep(1.5)
    grown = kernel.value("(lambda d: (len(d), list(d.holoviews('goodput')[()].keys())))(bg.live)")
    assert grown[0] > before and grown[1] == ["h2-h1-1-0"], (before, grown)
    click(kernel, buttons[0])
    res = kernel.value("(lambda r: dict(interrupted=r.interrupted, exps=r.exps))(bg.wait(30))")
    assert res == {"interrupted": True, "exps": [1]}
    assert "stopped" in kernel.value("repr(bg)")
    assert (work / "1" / "flows" / "h2-h1-1-0.client.nflow").is_file()
    assert json.loads((work / "1" / "experiment.json").read_text())["interrupted"] is True
    assert _agents_idle(testbed) == {"h1": ([], []), "h2": ([], [])}


def test_a_background_stop_acts_at_once_while_another_cell_keeps_the_kernel_busy(kernel, testbed, tmp_path):
    work = tmp_path / "res"
    cell = f"%%netesto --background -D dur=30 --workdir {work} --as busy_bg\n" + STREAM.format(extra="", ca="cubic")
    ex = kernel.execute(cell)
    assert ex.status == "ok", ex.reply
    (button,) = [c["comm_id"] for _, c in ex.of("comm_open") if c["data"]["state"].get("_model_name") == "ButtonModel"]
    _wait_flows_running(kernel)
    # the kernel's main thread is busy for 12 s; the click comes 1 s into it
    busy = kernel.kc.execute("import time as _t; _busy_from = _t.time(); _t.sleep(12)")
    time.sleep(1)
    clicked = time.time()
    click(kernel, button)
    deadline = time.time() + 60
    while True:  # wait for the busy cell's end
        msg = kernel.kc.get_iopub_msg(timeout=max(1, deadline - time.time()))
        if (msg["parent_header"].get("msg_id") == busy and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            break
    ended = kernel.value("(lambda r: [r.interrupted, r.exps, busy_bg.ended])(busy_bg.wait(30))")
    assert ended[:2] == [True, [1]]
    # stopped within seconds of the click (its flows stopped, data fetched, hosts restored), not after the 12 s
    assert ended[2] - clicked < 8, ended[2] - clicked
    assert json.loads((work / "1" / "experiment.json").read_text())["interrupted"] is True
    assert _agents_idle(testbed) == {"h1": ([], []), "h2": ([], [])}


def test_a_background_cell_waited_for_gives_the_result(kernel, testbed, tmp_path):
    cell = f"%%netesto --background -D dur=1 --workdir {tmp_path / 'res'} --as bg2\n" + STREAM.format(extra="", ca="cubic")
    assert kernel.execute(cell).status == "ok"
    assert kernel.value("(lambda r: dict(ok=r.ok, exps=r.exps))(bg2.wait(60))") == {"ok": True, "exps": [1]}
    failing = f"%%netesto --background -D dur=1 --workdir {tmp_path / 'bad'} --as bg3\n" + STREAM.format(
        extra="", ca="nosuchca")
    assert kernel.execute(failing).status == "ok"
    ex = kernel.execute("bg3.wait(60)")
    assert ex.status == "error" and "nosuchca" in ex.reply["evalue"]  # wait() raises the run's error
