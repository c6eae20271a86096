"""The .ntrace file: written whole, read back table by table; damage costs only the damaged block."""

from __future__ import annotations

import struct
from array import array
from pathlib import Path

import pytest

from netesto.collectors.ringbuf import EventFormat, PageLayout
from netesto.collectors.tracesplit import Clock, Decoder, spool_pages, write_split
from netesto.errors import RawDataError
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter
from netesto.raw.ntrace import BLOCK_ROWS, TABLES, read_trace, write_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def decoded() -> Decoder:
    """The captured pages (tests/data/trace) through a decoder."""
    names = ("tcp_probe", "tcp_retransmit_skb", "tcp_cong_state_set")
    dec = Decoder(PageLayout.parse((DATA / "header_page").read_text()),
                  {n: EventFormat.parse((DATA / f"{n}.format").read_text()) for n in names})
    with open(DATA / "pages.spool", "rb") as fh:
        for _cpu, page in spool_pages(fh):
            dec.page(page)
    return dec


def tables(n: int) -> dict[str, dict[str, array]]:
    out: dict[str, dict[str, array]] = {}
    for name, cols in TABLES.items():
        rows = n if name == "probe" else 2
        out[name] = {c.name: array(c.typecode, [i % 200 if c.typecode != "d" else 1000.0 + i / 1e3
                                                for i in range(rows)]) for c in cols}
    return out


def test_a_trace_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "f.client.ntrace"
    n = BLOCK_ROWS + 10  # two blocks of probe events
    write_trace(path, tables(n), {"flow_id": "f", "side": "client"}, {"events": {"probe": n}})
    trace = read_trace(path)
    assert trace.rows("probe") == n and trace.rows("retransmit") == 2 and trace.rows("cong_state") == 2
    assert list(trace.tables["probe"]["snd_cwnd"][-3:]) == [(n - 3) % 200, (n - 2) % 200, (n - 1) % 200]
    assert trace.units["probe"]["srtt"] == "us" and trace.header["flow_id"] == "f"
    assert trace.summary == {"events": {"probe": n}} and not trace.truncated and not trace.damaged
    assert not list(tmp_path.glob("*.tmp"))


def test_a_column_of_the_wrong_length_is_refused_and_leaves_no_file(tmp_path: Path) -> None:
    bad = tables(5)
    bad["probe"]["srtt"] = array("I", [1, 2])
    with pytest.raises(RawDataError, match="column srtt has 2 values, expected 5"):
        write_trace(tmp_path / "x.ntrace", bad, {}, {})
    assert list(tmp_path.iterdir()) == []


def test_a_cut_file_keeps_its_whole_blocks_and_a_damaged_block_only_loses_itself(tmp_path: Path) -> None:
    path = tmp_path / "f.ntrace"
    write_trace(path, tables(BLOCK_ROWS + 10), {}, {"events": {}})
    data = path.read_bytes()
    cut = tmp_path / "cut.ntrace"
    cut.write_bytes(data[: len(data) - 100])
    trace = read_trace(cut)
    assert trace.truncated and trace.summary is None and trace.rows("probe") >= BLOCK_ROWS
    # damage one byte inside the first events block: it is skipped, the rest read
    head_len = struct.unpack_from("<I", data, 12)[0]
    first = 12 + 8 + head_len
    broken = bytearray(data)
    broken[first + 8 + 50] ^= 0xFF
    (tmp_path / "dmg.ntrace").write_bytes(bytes(broken))
    trace = read_trace(tmp_path / "dmg.ntrace")
    assert trace.damaged and "checksum" in trace.damaged[0]
    assert trace.rows("probe") == 10 and trace.summary is not None


def test_not_a_trace_is_named(tmp_path: Path) -> None:
    (tmp_path / "x.ntrace").write_bytes(b"garbage and more garbage")
    with pytest.raises(RawDataError, match="x.ntrace.*bad magic"):
        read_trace(tmp_path / "x.ntrace")
    flow = tmp_path / "f.nflow"
    FlowWriter(flow, FLOW_COLUMNS, {}).close({})
    with pytest.raises(RawDataError, match="not a trace header"):
        read_trace(flow)


def test_events_go_to_the_flow_end_whose_header_names_their_addresses(tmp_path: Path) -> None:
    dec = decoded()
    exp = tmp_path / "1"
    (exp / "flows").mkdir(parents=True)
    # the client end of a flow: its header's addresses, v4-mapped as a dual-stack socket reports them
    FlowWriter(exp / "flows" / "h1-h2-1-0.client.nflow", FLOW_COLUMNS,
               {"local": ["::ffff:127.0.0.1", 55754], "remote": ["127.0.0.1", 47021]}).close({})
    clock = Clock(((100.0, 1100.0), (200.0, 1200.0)))  # wall = mono + 1000
    done = write_split(dec.out, exp, "h1", clock, {"host": "h1"}, {"host_dropped": 0})
    assert sorted(done["files"]) == ["flows/h1-h2-1-0.client.ntrace", "traces/h1-127.0.0.1_47021-127.0.0.1_55754.ntrace"]
    assert done["foreign_events"] == 0
    trace = read_trace(exp / "flows" / "h1-h2-1-0.client.ntrace")
    assert trace.header["flow_id"] == "h1-h2-1-0" and trace.header["side"] == "client"
    assert trace.rows("retransmit") == 1 and trace.summary["events"]["probe"] == trace.rows("probe")
    t_wall, t_mono = trace.tables["probe"]["t_wall"], trace.tables["probe"]["t_mono"]
    assert all(abs(w - m - 1000.0) < 1e-6 for w, m in zip(t_wall, t_mono))


def test_a_connection_s_events_from_several_cpus_come_out_in_time_order() -> None:
    from array import array as arr

    from netesto.collectors.tracesplit import conn_tables

    dec = decoded()
    ev = dec.out.conns[("127.0.0.1", 55754, "127.0.0.1", 47021)]
    size = dec.out.layouts["probe"].size
    whole = bytes(ev.raw["probe"])
    n = ev.count("probe")
    want = list(dec.out.columns(ev, "probe")["snd_una"])
    # the second half as if another CPU's buffer gave it first: the spool's order, not the time's
    half = n // 2
    ev.raw["probe"] = bytearray(whole[half * size:] + whole[: half * size])
    ev.ns["probe"] = arr("Q", list(ev.ns["probe"][half:]) + list(ev.ns["probe"][:half]))
    got = conn_tables(dec.out, ev, Clock(((0.0, 0.0), (1.0, 1.0))))["probe"]
    assert list(got["t_mono"]) == sorted(got["t_mono"]) and list(got["snd_una"]) == want
