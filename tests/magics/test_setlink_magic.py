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


def test_a_shape_given_as_one_define_word_plans(shell, capsys) -> None:
    shell.run_cell_magic("netesto", "--plan -D shape=step:50mbit:10mbit:at=2", CELL)
    assert "h1  SET_LINK exp=0 rate=step:50mbit:10mbit:at=2" in capsys.readouterr().out


def test_a_bad_shape_is_one_message_with_the_cell_location(shell) -> None:
    with pytest.raises(UsageError, match=r"<cell>:1:18: error: SET_LINK: unknown shape 'stpe'"):
        shell.run_cell_magic("netesto", "--plan -D shape=stpe:50mbit:10mbit:at=2", CELL)


def test_a_lab_whose_host_has_no_shaped_link_is_refused_before_the_run(shell, tmp_path) -> None:
    from netesto.controller import Lab

    lab = tmp_path / "lab.toml"
    lab.write_text(Lab.of(h1={"control": "127.0.0.1", "port": 1}, h2={"control": "127.0.0.1", "port": 1},
                          insecure=True).to_toml())
    with pytest.raises(UsageError, match=r"<cell>:1: SET_LINK host=h1: the lab gives h1 no shaped link"):
        shell.run_cell_magic("netesto", f"--plan --lab {lab} --workdir {tmp_path} -D shape=10mbit", CELL)
