"""The .nflow raw format: round trip, crash tolerance, corruption errors."""

from __future__ import annotations

import math

import msgpack
import pytest

from netesto.errors import RawDataError
from netesto.raw import nflow as rawformat
from netesto.raw import nflow_format
from netesto.raw.columns import FLOW_COLUMNS, PING_COLUMNS
from netesto.raw.nflow import Column, FlowWriter, decode_flow, read_flow

COLS = (Column("t", "d", "s"), Column("cwnd", "I", "packets"), Column("bytes", "Q", "bytes"))


def _write(path, rows, *, summary=None, flush_rows=3):
    w = FlowWriter(path, COLS, {"flow": {"flow_id": "a-b-1-0"}, "side": "client"}, flush_rows=flush_rows)
    for row in rows:
        w.append(row)
    w.close(summary)
    return path


def test_round_trip_keeps_every_row_header_units_and_summary(tmp_path):
    rows = [(i * 0.01, 10 + i, 1000 * i) for i in range(10)]
    flow = read_flow(_write(tmp_path / "f.nflow", rows, summary={"status": "ok", "bytes": 9000}))
    assert flow.rows == 10 and not flow.truncated
    assert list(flow.columns["cwnd"]) == [r[1] for r in rows]
    assert list(flow.columns["bytes"]) == [r[2] for r in rows]
    assert flow.units == {"t": "s", "cwnd": "packets", "bytes": "bytes"}
    assert flow.header["side"] == "client" and flow.header["flow"]["flow_id"] == "a-b-1-0"
    assert flow.summary == {"status": "ok", "bytes": 9000}


def test_rows_are_on_disk_before_close(tmp_path):
    path = tmp_path / "live.nflow"
    w = FlowWriter(path, COLS, flush_rows=2)
    for i in range(5):
        w.append((float(i), i, i))
    # The writer process could die now: the first 4 rows were flushed in 2 blocks.
    flow = read_flow(path)
    assert flow.rows == 4 and flow.summary is None
    w.close()
    assert read_flow(path).rows == 5


def test_cut_short_file_keeps_complete_blocks_and_says_truncated(tmp_path):
    path = _write(tmp_path / "f.nflow", [(float(i), i, i) for i in range(9)], flush_rows=3)
    data = path.read_bytes()
    for cut in range(len(data) - 1, len(data) - 40, -7):
        flow = decode_flow(data[:cut], path="cut")
        assert flow.truncated
        assert flow.rows in (6, 9)


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda d: b"XXXXXXXX" + d[8:], "bad magic"),
        (lambda d: d[:8] + b"\x09\x00" + d[10:], "format version 9"),
        (lambda d: d[:4], "too short"),
        (lambda d: d[:40] + bytes([d[40] ^ 0xFF]) + d[41:], "checksum mismatch"),
    ],
)
def test_corruption_names_the_file_and_the_problem(tmp_path, mangle, message):
    path = _write(tmp_path / "f.nflow", [(1.0, 1, 1)] * 4)
    bad = tmp_path / "bad.nflow"
    bad.write_bytes(mangle(path.read_bytes()))
    with pytest.raises(RawDataError) as err:
        read_flow(bad)
    assert str(bad) in str(err.value) and message in str(err.value)


def test_a_samples_block_with_a_short_column_is_rejected(tmp_path):
    path = tmp_path / "short.nflow"
    w = FlowWriter(path, COLS)
    payload = msgpack.packb({"type": "samples", "n": 2, "cols": {"t": b"\0" * 16, "cwnd": b"\0" * 4, "bytes": b"\0" * 16}})
    w._write_block(msgpack.unpackb(payload))
    w.close()
    with pytest.raises(RawDataError, match="column 'cwnd' has 1 values, expected 2"):
        read_flow(path)


def test_missing_file_is_a_raw_data_error(tmp_path):
    with pytest.raises(RawDataError, match="cannot read"):
        read_flow(tmp_path / "nope.nflow")


def test_the_contract_columns_are_unique_and_valid():
    for cols in (FLOW_COLUMNS, PING_COLUMNS):
        names = [c.name for c in cols]
        assert len(names) == len(set(names))
        assert all(c.unit for c in cols)


def test_nan_survives_a_float_column(tmp_path):
    path = tmp_path / "p.nflow"
    with FlowWriter(path, PING_COLUMNS) as w:
        w.append((1.0, 2.0, 1, float("nan")))
    assert math.isnan(read_flow(path).columns["rtt"][0])
    assert rawformat.FORMAT_VERSION[0] == 1


def test_a_file_without_later_added_columns_reads_by_name(tmp_path):
    """Files from before segs_out & co. existed: the reader takes whatever columns a file has."""
    added = {"segs_out", "segs_in", "data_segs_in", "data_segs_out"}
    assert added <= {c.name for c in FLOW_COLUMNS}
    older = tuple(c for c in FLOW_COLUMNS if c.name not in added)
    path = tmp_path / "old.nflow"
    with FlowWriter(path, older, {"side": "client"}) as writer:
        writer.append([1] * len(older))
    flow = read_flow(path)
    assert flow.rows == 1 and not added & set(flow.columns)
    assert flow.columns["snd_cwnd"][0] == 1


def test_write_columns_writes_a_ready_made_block_after_buffered_rows(tmp_path):
    from array import array

    cols = (Column("a", "I", "1"), Column("b", "d", "s"))
    path = tmp_path / "f.nflow"
    with FlowWriter(path, cols, flush_rows=100) as writer:
        writer.append([1, 0.5])  # buffered: must come before the block
        writer.write_columns(2, {"a": array("I", [2, 3]).tobytes(), "b": array("d", [1.5, 2.5]).tobytes()})
        assert writer.rows == 3
        with pytest.raises(RawDataError, match="column 'b'"):
            writer.write_columns(2, {"a": array("I", [2, 3]).tobytes(), "b": b"short"})
        with pytest.raises(RawDataError, match="no data"):
            writer.write_columns(1, {"a": array("I", [4]).tobytes()})
    flow = read_flow(path)
    assert list(flow.columns["a"]) == [1, 2, 3]
    assert list(flow.columns["b"]) == [0.5, 1.5, 2.5]


def _blocks_of(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each block after the preamble."""
    out, pos = [], nflow_format.PREAMBLE.size
    while pos < len(data):
        length, _ = nflow_format.BLOCK.unpack_from(data, pos)
        out.append((pos, nflow_format.BLOCK.size + length))
        pos += nflow_format.BLOCK.size + length
    return out


def test_a_damaged_block_loses_only_itself(tmp_path):
    """A flipped byte inside a block's payload: the blocks before and after it are kept,
    and what was skipped is named (losing every sample of a flow to one bad byte is not
    'keeping the data already collected')."""
    path = _write(tmp_path / "f.nflow", [(float(i), i, i) for i in range(12)], summary={"status": "ok"})
    data = path.read_bytes()
    blocks = _blocks_of(data)  # header, 4 blocks of 3 rows, summary
    assert len(blocks) == 6
    pos, size = blocks[2]  # rows 3..5
    bad = bytearray(data)
    bad[pos + size - 5] ^= 0xFF
    flow = decode_flow(bytes(bad), path="bad")
    assert list(flow.columns["t"]) == [0.0, 1.0, 2.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    assert flow.summary is not None and not flow.truncated
    assert flow.damaged == [f"block at byte {pos}: checksum mismatch; skipped its {size} bytes"]


def test_a_damaged_length_keeps_the_blocks_before_it(tmp_path):
    path = _write(tmp_path / "f.nflow", [(float(i), i, i) for i in range(12)], summary={"status": "ok"})
    data = path.read_bytes()
    pos, _ = _blocks_of(data)[3]  # rows 6..8: its length now points into the middle of the next
    bad = bytearray(data)
    bad[pos] ^= 0x01
    flow = decode_flow(bytes(bad), path="bad")
    assert list(flow.columns["t"]) == [float(i) for i in range(6)]
    assert flow.summary is None
    assert flow.damaged == [f"block at byte {pos}: checksum mismatch; the {len(data) - pos} bytes from there "
                            "are unreadable"]
    # a damaged header still leaves nothing to read: an error naming the file
    with pytest.raises(RawDataError, match=f"block at byte {nflow_format.PREAMBLE.size}: checksum mismatch"):
        decode_flow(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:], path="bad")
