"""A driver flow's sampled rows keep what only the tool counted: transactions, each latency row once."""

from __future__ import annotations

from pathlib import Path

from netesto.collectors.sockfiles import carry_tool_rows, watched_id
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter, read_flow

NAMES = [c.name for c in FLOW_COLUMNS]


def _flow(path: Path, rows: list[dict[str, float]]):
    w = FlowWriter(path, FLOW_COLUMNS, {})
    for row in rows:
        w.append([row.get(n, 0) for n in NAMES])
    w.close({})
    return read_flow(path)


def test_transactions_and_latencies_of_the_tool_come_onto_the_10_ms_rows(tmp_path: Path) -> None:
    sampled = _flow(tmp_path / "s.nflow", [{"t_mono": 10.0 + k * 0.01, "snd_cwnd": 10} for k in range(100)])
    tool = _flow(tmp_path / "t.nflow", [{"t_mono": 10.25, "transactions": 50, "lat_count": 50, "lat_p99": 900.0},
                                        {"t_mono": 10.5, "transactions": 120, "lat_count": 70, "lat_p99": 800.0}])
    carry_tool_rows(sampled, tool)
    tr = list(sampled.columns["transactions"])
    assert tr[:25] == [0] * 25 and tr[25] == 50 and tr[49] == 50 and tr[50:] == [120] * 50
    assert sum(sampled.columns["lat_count"]) == 120  # each tool row once
    assert sampled.columns["lat_p99"][25] == 900.0 and sampled.columns["lat_p99"][50] == 800.0
    assert list(sampled.columns["snd_cwnd"]) == [10] * 100  # the socket's own columns untouched


def test_a_stream_tool_file_carries_nothing(tmp_path: Path) -> None:
    sampled = _flow(tmp_path / "s.nflow", [{"t_mono": 1.0 + k * 0.01} for k in range(10)])
    tool = _flow(tmp_path / "t.nflow", [{"t_mono": 1.05, "app_bytes_tx": 1000}])
    carry_tool_rows(sampled, tool)
    assert sum(sampled.columns["transactions"]) == 0 and sum(sampled.columns["app_bytes_tx"]) == 0


def test_both_ends_of_a_watched_connection_name_it_alike() -> None:
    assert watched_id("w", ["10.0.0.1", 40000], ["10.0.0.2", 80]) == watched_id("w", ["10.0.0.2", 80],
                                                                                  ["10.0.0.1", 40000]) == "w:80:40000"
