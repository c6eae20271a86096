"""inlib.rateTest: each flag runs exactly the experiments of the library's table."""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from netesto.vocab import parse_size

from .planning import REPO, experiments, plan


class Row(NamedTuple):
    num: str  # the original table's number, or s1/s2/s32 for its unnumbered stream tests
    name: str
    nclients: int
    sizes: tuple[str, ...] | None  # None = stream
    instances: int | None  # None = the global $instances
    reps: int
    flag: str | None
    group: str


S = None
ROWS = (
    Row("1", "1s1c01.fr", 1, ("1M",), None, 1, "rate1r", "rate1"),
    Row("2", "1s1c01.fs", 1, S, None, 1, "rate1s", "rate1"),
    Row("3", "1s2c01.fr", 2, ("1M",), None, 1, "rate2r", "rate2"),
    Row("4", "1s2c01.fs", 2, S, None, 1, "rate2s", "rate2"),
    Row("5", "1s2c02.fr", 2, ("1M", "1M"), None, 1, "rate2r1", "rate2"),
    Row("6", "1s2c02.fr", 2, ("16M", "16M"), None, 1, None, "rate2"),
    Row("7", "1s2c02.1fr", 2, ("1M", "1M", "10K"), None, 1, "rate2r1", "rate2"),
    Row("8", "1s2c02.1fr", 2, ("16M", "16M", "10K"), None, 1, None, "rate2"),
    Row("9", "1s3c01.0fr", 3, ("1M",), 1, 1, "rate3r1", "rate3"),
    Row("10", "1s3c02.0fr", 3, ("1M",) * 2, 1, 1, "rate3r2", "rate3"),
    Row("11", "1s3c04.0fr", 3, ("1M",) * 4, 1, 1, "rate3r4", "rate3"),
    Row("12", "1s3c08.0fr", 3, ("1M",) * 4, 2, 2, None, "rate3"),
    Row("13", "1s3c16.0fr", 3, ("1M",) * 4, 4, 2, None, "rate3"),
    Row("14", "1s3c32.0fr", 3, ("1M",) * 4, 8, 2, None, "rate3"),
    Row("s1", "1s3c01fs", 3, S, 1, 1, "rate3s1", "rate3s"),
    Row("s2", "1s3c02fs", 3, S, 2, 1, "rate3s2", "rate3s"),
    Row("15", "1s3c04fs", 3, S, 4, 1, "rate3s4", "rate3s"),
    Row("16", "1s3c08fs", 3, S, 8, 1, "rate3s8", "rate3s"),
    Row("17", "1s3c16fs", 3, S, 16, 1, None, "rate3s"),
    Row("s32", "1s3c32fs", 3, S, 32, 1, None, "rate3s"),
    Row("18", "1s3c01.pfr", 3, ("1M", "10K"), 1, 1, "rate3p1", "rate3p"),
    Row("19", "1s3c02.pfr", 3, ("1M", "10K"), 2, 1, "rate3p2", "rate3p"),
    Row("20", "1s3c04.pfr", 3, ("1M", "10K"), 4, 1, "rate3p4", "rate3p"),
    Row("21", "1s3c08.pfr", 3, ("1M", "10K"), 8, 2, "rate3p8", "rate3p"),
    Row("22", "1s3c16.pfr", 3, ("1M", "10K"), 16, 2, "rate3p16", "rate3p"),
    Row("23", "1s3c32.pfr", 3, ("1M", "10K"), 32, 2, "rate3p32", "rate3p"),
    Row("24", "1s3c01.xfr", 3, ("8M", "1M", "50K", "10K"), 1, 1, None, "rate3x"),
    Row("25", "1s3c02.xfr", 3, ("8M", "1M", "50K", "10K"), 2, 1, None, "rate3x"),
    Row("26", "1s3c04.xfr", 3, ("8M", "1M", "50K", "10K"), 4, 1, None, "rate3x"),
    Row("27", "1s3c08.xfr", 3, ("8M", "1M", "50K", "10K"), 8, 2, None, "rate3x"),
    Row("28", "1s3c16.xfr", 3, ("8M", "1M", "50K", "10K"), 16, 2, None, "rate3x"),
    Row("29", "1s3c32.xfr", 3, ("8M", "1M", "50K", "10K"), 32, 2, None, "rate3x"),
)
FLAGS = sorted({r.flag for r in ROWS if r.flag} | {r.group for r in ROWS})
CLIENTS = {1: ("a",), 2: ("a", "b"), 3: ("a", "b", "c")}
SETUP = ("SOURCE inlib\nSOURCE inlib.rateTest\nSET servers1=srv\nSET clients1=a\n"
         "SET clients2=a,b\nSET clients3=a,b,c\nSET ca=cubic\nSET dur=7\n"
         "SET instances=5\nSET reply=9\n")


def flows(row: Row, instances: int = 5, reply: int = 9) -> list[tuple]:
    """The (client, server, test, req, reply, instances) of one experiment's DO_CLIENTs."""
    inst = row.instances if row.instances is not None else instances
    out = []
    for client in CLIENTS[row.nclients]:
        if row.sizes is None:
            out.append((client, "srv", "TCP_STREAM", 0, 1, inst))
        else:
            rep = reply if row.instances is None else 1
            out.extend((client, "srv", "TCP_RR", parse_size(s), rep, inst) for s in row.sizes)
    return out


def observed(text: str) -> list[tuple[str, list[tuple]]]:
    return [(e.name, [(c.host, c.server, c.test, c.req, c.reply, c.instances)
                      for c in e.clients]) for e in experiments(plan(text))]


def expected(rows) -> list[tuple[str, list[tuple]]]:
    return [(r.name, flows(r)) for r in rows for _ in range(r.reps)]


def test_the_table_has_29_numbered_tests_in_six_groups():
    numbered = [r.num for r in ROWS if r.num.isdigit()]
    assert numbered == [str(i) for i in range(1, 30)]
    assert len({r.group for r in ROWS}) == 6
    assert len(FLAGS) == 24


@pytest.mark.parametrize("flag", FLAGS)
def test_each_flag_runs_its_experiments(flag):
    rows = [r for r in ROWS if flag in (r.flag, r.group)]
    got = observed(SETUP + f"SET {flag}=1\nRUN ExpRate\n")
    assert got == expected(rows)
    # every experiment: one DO_SERVER pair on the server, its clients fetched, processed
    for exp in experiments(plan(SETUP + f"SET {flag}=1\nRUN ExpRate\n")):
        assert [s.host for s in exp.starts] == ["srv"] and [s.host for s in exp.ends] == ["srv"]
        assert exp.fetched == ["srv", *sorted({c.host for c in exp.clients})]
        assert {c.ca for c in exp.clients} == {"cubic"} and {c.dur for c in exp.clients} == {7.0}
        assert exp.processed == 1


def test_no_flag_no_experiment():
    assert plan(SETUP + "RUN ExpRate\n") == []


def test_group_and_own_flag_together_run_a_test_once():
    got = observed(SETUP + "SET rate1=1\nSET rate1r=1\nSET rate1s=1\nRUN ExpRate\n")
    assert [name for name, _ in got] == ["1s1c01.fr", "1s1c01.fs"]


def test_every_test_of_the_battery():
    got = observed(SETUP + "".join(f"SET {g}=1\n" for g in sorted({r.group for r in ROWS}))
                   + "RUN ExpRate\n")
    assert got == expected(ROWS)
    assert len(got) == 32 + 9  # 32 tests, 9 of them run twice


def test_ca_list_repeats_each_experiment_per_ca():
    exps = experiments(plan(SETUP + "SET ca=cubic,bbr,reno\nSET rate3s4=1\nRUN ExpRate\n"))
    assert [e.name for e in exps] == ["1s3c04fs"] * 3
    assert [{c.ca for c in e.clients} for e in exps] == [{"cubic"}, {"bbr"}, {"reno"}]
    assert [e.number for e in exps] == [1, 2, 3]


def test_reqs1_overrides_the_first_test_sizes():
    got = observed(SETUP + "SET reqs1F=1\nSET reqs1=64K,2M\nSET rate1r=1\nRUN ExpRate\n")
    assert got == [("1s1c01.fr", [("a", "srv", "TCP_RR", 65536, 9, 5),
                                  ("a", "srv", "TCP_RR", 2 * 1024 * 1024, 9, 5)])]


@pytest.mark.parametrize("hosts", [
    "SET server1=srv\nSET client1=a\nSET client2=b\nSET client3=c\n",  # one host per name
    "SET server1=srv\nSET client3=a,b,c\n",  # the README's spelling
])
def test_host_variables_of_the_readme_and_the_usage_notes(hosts):
    text = (hosts + "SOURCE inlib\nSOURCE inlib.rateTest\nSET ca=cubic\nSET dur=7\n"
            "SET rate3p1=1\nRUN ExpRate\n")
    rows = [r for r in ROWS if r.flag == "rate3p1"]
    assert observed(text) == expected(rows)


def test_rate_test_loads_inlib_itself():
    text = SETUP.replace("SOURCE inlib\n", "", 1) + "SET rate1s=1\nRUN ExpRate\n"
    assert observed(text) == expected([r for r in ROWS if r.flag == "rate1s"])


def _doc_rows() -> list[tuple[str, str, str | None, str]]:
    doc = (REPO / "docs" / "macro-libraries.md").read_text(encoding="utf-8")
    section = doc.split("<!-- rate-table -->")[1].split("<!-- /rate-table -->")[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and re.fullmatch(r"\d+|-", cells[0]):
            out.append((cells[0], cells[3], None if cells[4] == "-" else cells[4], cells[5]))
    return out


def test_the_documented_table_matches_the_library():
    numbered = {r.num: r for r in ROWS if r.num.isdigit()}
    doc = _doc_rows()
    assert [d for d in doc if d[0] != "-"] == [
        (n, numbered[n].name, numbered[n].flag, numbered[n].group) for n in numbered]
    assert [d[1:] for d in doc if d[0] == "-"] == [
        (r.name, r.flag, r.group) for r in ROWS if not r.num.isdigit()]


def test_hosts_and_flags_as_run_arguments():
    text = ("SOURCE inlib.rateTest\nRUN ExpRate servers1=srv clients3=a,b,c ca=cubic dur=7 "
            "rate3s4=1\n")
    assert observed(text) == expected([r for r in ROWS if r.flag == "rate3s4"])
