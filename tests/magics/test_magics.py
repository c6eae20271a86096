"""The %netesto / %%netesto magics in a real IPython shell, and a run on a real lab."""

from __future__ import annotations

import os

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

SHORT_STREAM = """\
SOURCE inlib
RUN InlibShortWaits
RUN OneFlowStream server=h1 client=h2 ca=cubic dur=$dur expName=magic
"""


@pytest.fixture(scope="module")
def loopback_bed(tmp_path_factory):
    """One loopback testbed (agents, no shaping) for the cells of this module that run flows:
    each runs in a workdir of its own, and every run fetches (so frees) what it made."""
    from netesto.testbed.lifecycle import TestbedConfig, down, up

    tb = up(TestbedConfig.parse(name=f"mg{os.getpid() % 10000}", hosts=2, loopback=True,
                                dir=tmp_path_factory.mktemp("loopback-bed")))
    try:
        yield tb
    finally:
        down(tb.name)


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "netesto")
    return sh


def test_help_comes_from_magic_arguments(shell):
    doc = shell.find_cell_magic("netesto").__doc__
    assert "--plan" in doc and "--as" in doc and "VAR=VALUE" in doc
    # `%%netesto?` and `%netesto?` name the magics as users type them (it said %netesto_cell)
    assert "  %%netesto [--lab LAB]" in doc and "netesto_cell" not in doc
    line_doc = shell.find_line_magic("netesto").__doc__
    assert "  %netesto {lab,workdir,show,reset}" in line_doc and "netesto_line" not in line_doc


def test_a_plot_is_an_object_the_notebook_shows_and_the_magics_display_it_at_once(shell):
    import holoviews as hv

    from netesto.magics import show
    from netesto.plots.notebook import Shown
    from netesto.plots.notebook import show as shown

    from netesto.plots.inline import forget

    forget()  # this process's first plot carries BokehJS; the next ones refer to it
    curve = hv.Curve([(0, 1), (1, 3)], label="a curve")
    obj = shown(curve, title="t")
    first = obj._repr_html_()
    assert isinstance(obj, Shown) and first.startswith('<div class="netesto-plot">') and "BEGIN bokeh.min.js" in first
    with capture_output() as cap:
        show(curve)
    html = [o.data["text/html"] for o in cap.outputs]
    assert len(html) == 1 and "a curve" in html[0] and "BEGIN bokeh.min.js" not in html[0]


def test_plan_only_prints_the_plan(shell, capsys):
    shell.run_cell_magic("netesto", "--plan -D dur=2", SHORT_STREAM)
    out = capsys.readouterr().out
    assert "h2  DO_CLIENT" in out and "dur=2" in out and "ca=cubic" in out
    assert out.rstrip().endswith("s")  # "N actions, about S s"


def test_script_errors_are_one_message_with_the_location(shell):
    with pytest.raises(UsageError) as err:
        shell.run_cell_magic("netesto", "", "SET a=1\nDO_CLENT host=h1\n")
    text = str(err.value)
    assert "<cell>:2:1" in text and "did you mean DO_CLIENT?" in text


def test_no_lab_is_a_usage_error(shell):
    with pytest.raises(UsageError, match="no lab"):
        shell.run_cell_magic("netesto", "", "WAIT 0\n")


def test_bad_define_and_missing_lab_file(shell, tmp_path):
    with pytest.raises(UsageError, match="VAR=VALUE"):
        shell.run_cell_magic("netesto", "-D oops", "WAIT 0\n")
    with pytest.raises(UsageError):
        shell.run_line_magic("netesto", f"lab {tmp_path / 'nope.toml'}")


def test_a_cell_runs_on_a_lab_and_binds_the_result(shell, loopback_bed, tmp_path, capsys):
    shell.run_line_magic("netesto", f"lab {loopback_bed.lab}")
    shell.run_line_magic("netesto", f"workdir {tmp_path / 'res'}")
    with capture_output() as shown:
        shell.run_cell_magic("netesto", "-D dur=1 --as res", SHORT_STREAM)
    with capture_output() as quiet:  # without --as the result is bound, not shown
        shell.run_cell_magic("netesto", "-D dur=1", SHORT_STREAM)
    assert "experiments 1" in shown.stdout and "`res`" in shown.stdout
    # --as shows the run after the cell: its table, the flow's numbers and its plots (bokeh, inline)
    [html] = [o.data["text/html"] for o in shown.outputs if "text/html" in o.data]
    assert 'class="netesto-result"' in html and "magic" in html and "Bokeh" in html
    assert "`netesto_result`" in quiet.stdout and quiet.outputs == []
    result = shell.user_ns["res"]
    assert result.ok and result.exps == [1]
    ds = result[1].dataset
    assert list(ds.ca.values) == ["cubic"]
    assert float(ds.rate.values[0]) > 0
    assert (tmp_path / "res" / "exp.csv").exists()


def test_an_unclosed_quote_in_the_magic_line_is_a_usage_error(shell):
    # parse_argstring splits with shlex, whose ValueError used to escape as a traceback.
    with pytest.raises(UsageError, match="No closing quotation"):
        shell.run_cell_magic("netesto", "--plan -D 'desc=a b", "WAIT 0\n")
    with pytest.raises(UsageError, match="No closing quotation"):
        shell.run_line_magic("netesto", "lab 'my lab.toml")


def test_a_bad_result_name_is_refused_before_anything_runs(shell, tmp_path):
    # --as 1x used to run the whole cell and then bind the result to a name no code can use.
    with pytest.raises(UsageError, match="--as 1x"):
        shell.run_cell_magic("netesto", f"--as 1x --lab {tmp_path / 'nope.toml'}", "WAIT 0\n")
    with pytest.raises(UsageError, match="--as"):
        shell.run_cell_magic("netesto", "--plan --as a.b", "WAIT 0\n")


def test_a_missing_lab_file_shows_no_progress_view(shell, tmp_path, capsys):
    with pytest.raises(UsageError, match="not found"):
        shell.run_cell_magic("netesto", f"--lab {tmp_path / 'nope.toml'}", "WAIT 0\n")
    assert "FloatProgress" not in capsys.readouterr().out


def test_plan_shows_what_the_run_would_do(shell, tmp_path, capsys):
    # --plan used to start from experiment 1 and plain host names whatever the
    # workdir's counter and the lab's host_suffix said, and missed SOURCE files
    # that the run finds in the workdir.
    from netesto.controller import Lab

    work = tmp_path / "work"
    work.mkdir()
    (work / "counter").write_text("41\n")
    (work / "lib.nts").write_text("SET dur=3\n")
    lab = tmp_path / "lab.toml"
    lab.write_text(Lab.of(h1={"control": "127.0.0.1", "port": 1}, h2={"control": "127.0.0.1", "port": 2},
                          host_suffix="lab.example", insecure=True).to_toml())
    cell = "SOURCE lib.nts\nDO_CLIENT host=h1 server=h2 dur=$dur\n"
    shell.run_cell_magic("netesto", f"--plan --workdir {work} --lab {lab}", cell)
    out = capsys.readouterr().out
    assert "h1.lab.example  DO_CLIENT exp=42 server=h2.lab.example" in out and "dur=3" in out
    assert (work / "counter").read_text() == "41\n"  # planning uses up no number


def test_a_run_with_errors_still_binds_what_it_kept(shell, tmp_path):
    # run() raises when any host failed, with the RunResult as the error's detail; the
    # magic used to show the error and bind nothing, so the experiments it had
    # stored could not be reached from the notebook.
    from netesto.controller import Lab
    from tests.controller.agentproc import loopback_popen, start_agent

    agents = [start_agent(loopback_popen, f"h{i}", "127.0.0.1", tmp_path) for i in (1, 2)]
    try:
        lab = Lab.of(h1={"control": "127.0.0.1", "port": agents[0].port},
                     h2={"control": "127.0.0.1", "port": agents[1].port},
                     h3={"control": "127.0.0.1", "port": 1}, insecure=True)  # nobody listens on port 1
        path = tmp_path / "lab.toml"
        path.write_text(lab.to_toml())
        cell = ("DO_SERVER host=h2 exp=COUNTER start=1\nDO_CLIENT host=h1 server=h2 test=TCP_STREAM dur=1\n"
                "WAIT 1\nDO_SERVER host=h3\nGET_DATA host=h1\nGET_DATA host=h2\n")
        shell.user_ns.pop("partial", None)
        with pytest.raises(UsageError, match="h3") as err:
            shell.run_cell_magic("netesto", f"--lab {path} --workdir {tmp_path / 'w'} --as partial", cell)
    finally:
        for a in agents:
            a.stop()
    assert "`partial`" in str(err.value)
    result = shell.user_ns["partial"]
    assert result.exps == [1] and not result.ok
    assert (tmp_path / "w" / "1" / "flows" / "h1-h2-1-0.client.nflow").is_file()


def test_plan_with_a_lab_reports_what_run_would_refuse(shell, tmp_path):
    from netesto.controller import Lab

    lab = tmp_path / "lab.toml"
    lab.write_text(Lab.of(h1={"control": "127.0.0.1", "port": 1}, insecure=True).to_toml())
    with pytest.raises(UsageError, match=r"<cell>:2: host 'h2' is not in lab"):
        shell.run_cell_magic("netesto", f"--plan --lab {lab} --workdir {tmp_path}", "WAIT 1\nDO_SERVER host=h2\n")
    # the run's own check names the cell the same way (it said <script>)
    with pytest.raises(UsageError, match=r"<cell>:2: host 'h2' is not in lab"):
        shell.run_cell_magic("netesto", f"--lab {lab} --workdir {tmp_path}", "WAIT 1\nDO_SERVER host=h2\n")


DEFINE_CELL = """\
SOURCE inlib
RUN InlibShortWaits
SET dur=1
BEGIN mymacro
RUN OneFlowStream server=h1 client=h2 ca=$myca dur=$dur expName=cells
END mymacro
SET myca=cubic
"""


def _fake_lab(tmp_path, name="lab.toml", **hosts):
    """A lab file whose hosts nobody serves: enough for cells without actions and --plan."""
    from netesto.controller import Lab

    path = tmp_path / name
    path.write_text(Lab.of(**{h: {"control": "127.0.0.1", "port": 1} for h in hosts or {"h1": 0, "h2": 0}},
                           insecure=True).to_toml())
    return path


def test_cells_share_what_earlier_cells_defined_on_a_real_lab(shell, loopback_bed, tmp_path, capsys):
    # Each cell used to start a fresh interpreter: SOURCE inlib, SET and BEGIN...END
    # in one cell, then RUN mymacro in the next, was "unknown macro".
    shell.run_line_magic("netesto", "reset")
    try:
        shell.run_line_magic("netesto", f"lab {loopback_bed.lab}")
        shell.run_line_magic("netesto", f"workdir {tmp_path / 'res'}")
        shell.run_cell_magic("netesto", "--as defs", DEFINE_CELL)
        assert shell.user_ns["defs"].exps == []
        shell.run_cell_magic("netesto", "--plan", "RUN mymacro\n")
        assert "h2  DO_CLIENT" in capsys.readouterr().out
        shell.run_cell_magic("netesto", "--as res", "RUN mymacro\n")
        result = shell.user_ns["res"]
        assert result.ok and result.exps == [1]
        ds = result[1].dataset
        assert list(ds.ca.values) == ["cubic"] and float(ds.rate.values[0]) > 0
        shell.run_line_magic("netesto", "reset")
        assert "cleared" in capsys.readouterr().out
        with pytest.raises(UsageError, match="unknown macro 'mymacro'") as err:
            shell.run_cell_magic("netesto", "--as res2", "RUN mymacro\n")
        assert "SOURCE inlib first?" in str(err.value) and "res2" not in shell.user_ns
    finally:
        shell.run_line_magic("netesto", "reset")


def test_a_cell_with_a_script_error_and_a_plan_leave_the_state_as_it_was(shell, tmp_path, capsys):
    shell.run_line_magic("netesto", "reset")
    shell.run_line_magic("netesto", f"lab {_fake_lab(tmp_path)}")
    shell.run_line_magic("netesto", f"workdir {tmp_path / 'w'}")
    try:
        shell.run_cell_magic("netesto", "", "SET dur=3\nBEGIN m\nWAIT $dur\nEND m\n")
        with pytest.raises(UsageError, match="unknown macro 'nosuch'"):
            shell.run_cell_magic("netesto", "", "SET dur=9\nBEGIN m2\nWAIT 1\nEND m2\nRUN nosuch\n")
        with pytest.raises(UsageError, match="did you mean DO_CLIENT"):
            shell.run_cell_magic("netesto", "", "SET dur=8\nDO_CLENT host=h1\n")
        shell.run_cell_magic("netesto", "--plan", "SET dur=7\nBEGIN m3\nWAIT 1\nEND m3\nRUN m\n")
        assert "WAIT seconds=7" in capsys.readouterr().out  # a plan sees its own and earlier definitions
        shell.run_cell_magic("netesto", "--plan", "RUN m\n")
        assert "WAIT seconds=3" in capsys.readouterr().out
        for gone in ("m2", "m3"):
            with pytest.raises(UsageError, match=f"unknown macro '{gone}'"):
                shell.run_cell_magic("netesto", "--plan", f"RUN {gone}\n")
        # Another lab keeps the state: variables and macros do not depend on the lab.
        shell.run_line_magic("netesto", f"lab {_fake_lab(tmp_path, 'other.toml', h1=0)}")
        shell.run_cell_magic("netesto", "--plan", "RUN m\n")
        assert "WAIT seconds=3" in capsys.readouterr().out
        with pytest.raises(UsageError, match="no argument"):
            shell.run_line_magic("netesto", "reset now")
    finally:
        shell.run_line_magic("netesto", "reset")
    with pytest.raises(UsageError, match=r"undefined variable \$dur"):
        shell.run_cell_magic("netesto", "--plan", "WAIT $dur\n")


def test_what_a_cell_defined_stays_when_its_run_fails_at_an_agent(shell, tmp_path, capsys):
    shell.run_line_magic("netesto", "reset")
    cell = "SET before=1\nDO_SERVER host=h1 exp=COUNTER\nGET_DATA host=h1\nSET after=2\n"
    try:
        with pytest.raises(UsageError, match="h1"):
            shell.run_cell_magic("netesto", f"--lab {_fake_lab(tmp_path)} --workdir {tmp_path / 'w'}", cell)
        shell.run_cell_magic("netesto", "--plan", "ECHO $before $after\n")
    finally:
        shell.run_line_magic("netesto", "reset")
    # h1 was dropped and the rest of the script ran: both SETs were executed.
    assert "ECHO text=1 2" in capsys.readouterr().out
