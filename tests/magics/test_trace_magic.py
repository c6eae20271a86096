"""``%%netesto --trace ENDS``: every DO_CLIENT of the cell without trace= records tcp_probe on those ends."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from tests.magics.test_magics import loopback_bed, shell  # noqa: F401 - fixtures

pytestmark = pytest.mark.netns  # root: tracefs

CELL = """\
DO_SERVER host=h2 start=1
DO_CLIENT host=h1 server=h2 test=TCP_STREAM ca=cubic dur=1
WAIT 1
GET_DATA host=h2
GET_DATA host=h1
PROCESS_EXP
"""


@pytest.fixture
def own_lab(shell):  # noqa: F811
    """The shell is shared with test_magics: its lab and workdir are put back after the test."""
    magics = shell.magics_manager.registry["NetestoMagics"]
    saved = (magics.lab, magics.lab_path, magics.workdir)
    yield
    magics.lab, magics.lab_path, magics.workdir = saved


def test_the_cell_s_flows_are_traced_on_the_ends_asked_for(shell, loopback_bed, tmp_path,  # noqa: F811
                                                            own_lab) -> None:
    shell.run_line_magic("netesto", f"lab {loopback_bed.lab}")
    shell.run_line_magic("netesto", f"workdir {tmp_path / 'res'}")
    with capture_output():
        shell.run_cell_magic("netesto", "--trace server --as traced", CELL)
        shell.run_cell_magic("netesto", "--as plain", CELL)
    ds = shell.user_ns["traced"][shell.user_ns["traced"].exps[0]].dataset
    assert float(ds.trace_events.sel(flow="h1-h2-1-0", end="server")) > 100
    assert float(ds.trace_events.sel(flow="h1-h2-1-0", end="client").fillna(0)) == 0
    plain = shell.user_ns["plain"][shell.user_ns["plain"].exps[0]].dataset
    assert "probe_time" not in plain


def test_an_unknown_end_is_a_usage_error(shell) -> None:  # noqa: F811
    with pytest.raises(UsageError, match="sender"):
        shell.run_cell_magic("netesto", "--trace sender", CELL)
