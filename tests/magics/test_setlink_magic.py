"""SET_LINK from a %%netesto cell: a shape passed as one -D word, and a lab without a shaped link refused."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

CELL = """\
SET_LINK host=h1 rate=$shape
DO_SERVER host=h1 exp=COUNTER start=1
DO_CLIENT host=h2 server=h1 test=TCP_STREAM dur=4
"""


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "netesto")
    return sh


def lab_file(tmp_path, *, shaped: bool):
    """A lab nobody serves (enough for --plan): h1, h2 and a router that shapes h1's link, or not."""
    from netesto.controller import Lab

    h1 = {"control": "127.0.0.1", "port": 1, **({"shape": {"agent": "router", "dev": "r-h1"}} if shaped else {})}
    lab = tmp_path / f"lab-{shaped}.toml"
    lab.write_text(Lab.of(h1=h1, h2={"control": "127.0.0.1", "port": 1}, router={"control": "127.0.0.1", "port": 1},
                          insecure=True).to_toml())
    return lab


def test_a_shape_given_as_one_define_word_plans(shell, capsys, tmp_path) -> None:
    lab = lab_file(tmp_path, shaped=True)
    shell.run_cell_magic("netesto", f"--plan --lab {lab} --workdir {tmp_path} -D shape=step:50mbit:10mbit:at=2", CELL)
    assert "h1  SET_LINK exp=0 rate=step:50mbit:10mbit:at=2" in capsys.readouterr().out


def test_a_bad_shape_is_one_message_with_the_cell_location(shell, tmp_path) -> None:
    with pytest.raises(UsageError, match=r"<cell>:1:18: error: SET_LINK: unknown shape 'stpe'"):
        shell.run_cell_magic("netesto", f"--plan --workdir {tmp_path} -D shape=stpe:50mbit:10mbit:at=2", CELL)


def test_a_lab_whose_host_has_no_shaped_link_is_refused_before_the_run(shell, tmp_path) -> None:
    lab = lab_file(tmp_path, shaped=False)
    with pytest.raises(UsageError, match=r"<cell>:1: SET_LINK host=h1: the lab gives h1 no shaped link"):
        shell.run_cell_magic("netesto", f"--plan --lab {lab} --workdir {tmp_path} -D shape=10mbit", CELL)
