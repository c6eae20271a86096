"""Truncated/corrupted raw files and failures while appending exp.csv."""

from __future__ import annotations

import hashlib

from pathlib import Path

import numpy as np
import pytest

from netesto.errors import ResultsError
from netesto.results import process_experiment
from netesto.results.expcsv import Field, aggregate, append_rows, parse_fields


def test_truncated_file_keeps_its_complete_blocks(workdir: Path) -> None:
    p = workdir / "1" / "flows" / "h1-h2-2-0.client.nflow"
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])  # the writer died mid-flow
    res = process_experiment(workdir, 1)
    assert res.ok
    assert any("h1-h2-2-0.client.nflow: truncated" in w for w in res.warnings)
    assert "truncated" in (workdir / "1" / "errors.txt").read_text()
    assert (workdir / "1" / "h1-h2-2.exp.out").exists()


def test_corrupted_file_is_named_and_the_rest_processed(workdir: Path, capsys) -> None:
    bad = workdir / "1" / "flows" / "h1-h2-1-0.client.nflow"
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    (workdir / "1" / "flows" / "h1-h2-3-0.server.nflow").write_bytes(b"garbage, not a flow file")
    res = process_experiment(workdir, 1)
    assert not res.ok
    joined = "\n".join(res.errors)
    assert "h1-h2-3-0.server.nflow: not a netesto flow file" in joined
    # the flipped byte loses one block of the client file, not the file: a warning naming both
    (damage,) = [w for w in res.warnings if "damaged" in w]
    assert f"{bad}: damaged: block at byte" in damage and "checksum mismatch" in damage
    err = capsys.readouterr().err
    assert "h1-h2-1-0.client.nflow" in err and "h1-h2-3-0.server.nflow" in err
    assert "checksum mismatch" in (workdir / "1" / "errors.txt").read_text()
    from netesto.results import open_experiment

    ds = open_experiment(workdir / "1")
    assert ds.sizes["flow"] == 3
    assert float(ds.rate.sel(flow="h1-h2-2-0")) > 0
    # Flow 1 kept its sender (client) file but one block: goodput and TCP state are there.
    assert float(ds.rate.sel(flow="h1-h2-1-0")) > 0
    assert float(ds.mean_cwnd.sel(flow="h1-h2-1-0")) > 0
    assert "not a netesto flow file" in ds.attrs["errors"]
    assert len((workdir / "exp.csv").read_text().splitlines()) == 5


def test_no_readable_flow_is_an_error(workdir: Path) -> None:
    for p in (workdir / "2" / "flows").glob("*.nflow"):
        p.write_bytes(b"NETESTO\x00\x09\x00\x00\x00")
    with pytest.raises(ResultsError, match="no flow data could be read.*format version 9"):
        process_experiment(workdir, 2)
    with pytest.raises(ResultsError, match="no such experiment directory"):
        process_experiment(workdir, 99)


class _Explodes:
    def __str__(self) -> str:
        raise OSError(28, "No space left on device")


def test_exp_csv_never_half_written(tmp_path: Path) -> None:
    fields = parse_fields("exp:one\nrate:sum\ndesc:one\n")
    path = tmp_path / "exp.csv"
    append_rows(path, fields, [{"exp": "1.0", "rate": "5.0", "desc": "x"}])
    before = path.read_bytes()
    rows = [{"exp": "2.0", "rate": "1.0", "desc": "y"} for _ in range(500)]
    rows.append({"exp": "3.0", "rate": _Explodes(), "desc": "z"})
    with pytest.raises(ResultsError, match="exp.csv: cannot append rows: .*No space left"):
        append_rows(path, fields, rows)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".exp.csv.lock", "exp.csv"]


def test_csv_quoting_round_trips(tmp_path: Path) -> None:
    import csv

    fields = (Field("exp", "one"), Field("desc", "one"), Field("ca", "all"))
    row = aggregate([("exp", "1.0"), ("ca", "cubic"), ("ca", "bbr")], fields,
                    desc='comma, "quote" and = sign\nnewline')
    append_rows(tmp_path / "exp.csv", fields, [row])
    with open(tmp_path / "exp.csv", newline="") as fh:
        (back,) = list(csv.DictReader(fh))
    assert back == {"exp": "1.0", "desc": 'comma, "quote" and = sign\nnewline', "ca": "cubic/bbr"}


def test_bad_experiment_json_is_named(workdir: Path) -> None:
    (workdir / "2" / "experiment.json").write_text("{not json")
    with pytest.raises(ResultsError, match=r"2/experiment.json: cannot read experiment description"):
        process_experiment(workdir, 2)


@pytest.mark.parametrize("key, value", [
    ("hosts", ["h1", "h2"]),
    ("flows", {"h1-h2-1-0": {}}),
    ("other", [["bw"]]),
    ("other", 7),
])
def test_a_misshapen_experiment_json_key_is_named(workdir: Path, key: str, value: object) -> None:
    """Valid JSON with a key of the wrong shape (a hand edit): a ResultsError
    naming the file and the key, not an AttributeError/ValueError."""
    import json

    p = workdir / "2" / "experiment.json"
    meta = json.loads(p.read_text())
    meta[key] = value
    p.write_text(json.dumps(meta))
    with pytest.raises(ResultsError, match=rf"2/experiment.json: '{key}'"):
        process_experiment(workdir, 2)


def test_experiment_json_other_as_text_and_odd_instances(workdir: Path) -> None:
    """``other`` written as PROCESS_EXP's ``k=v,k2=v2`` text is read as such;
    a non-numeric ``instances`` falls back to the flows found."""
    import json

    p = workdir / "2" / "experiment.json"
    meta = json.loads(p.read_text())
    meta["other"] = "bw=100mbit,testNote=edited"
    for f in meta["flows"]:
        f["instances"] = "two"
    p.write_text(json.dumps(meta))
    res = process_experiment(workdir, 2)
    assert res.ok
    row = res.rows[0]
    assert (row["bw"], row["testNote"], row["instances"]) == ("100mbit", "edited", "2")


def test_lost_experiment_json_still_processes(workdir: Path) -> None:
    """Without experiment.json the flows' own headers describe them."""
    (workdir / "3" / "experiment.json").unlink()
    res = process_experiment(workdir, 3)
    assert res.ok and res.exp == 3
    from netesto.results import open_experiment

    ds = open_experiment(workdir / "3")
    assert list(ds.ca.values) == ["bbr", "bbr"] and list(ds.group.values) == [1, 1]
    assert list(ds.host.values) == ["h1", "h1"] and list(ds.server.values) == ["h2", "h2"]


def test_existing_exp_csv_keeps_its_columns(tmp_path: Path) -> None:
    import csv

    path = tmp_path / "exp.csv"
    path.write_text("exp,rate,mine\n0.0,1.0,x\n")
    fields = parse_fields("exp:one\nca:all\nrate:sum\n")
    append_rows(path, fields, [aggregate([("exp", "1.0"), ("ca", "bbr"), ("rate", "2")], fields)])
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows == [["exp", "rate", "mine"], ["0.0", "1.0", "x"], ["1.0", "2.0", ""]]


_WRITER = """
import sys
from netesto.results.expcsv import append_rows, parse_fields
fields = parse_fields("exp:one\\nrate:sum\\ndesc:one\\n")
rows = [{"exp": f"{i}.0", "rate": "1.5", "desc": "x" * 200} for i in range(20000)]
print("ready", flush=True)
while True:
    append_rows(sys.argv[1], fields, rows)
"""


def test_killed_writer_never_leaves_a_half_written_exp_csv(tmp_path: Path) -> None:
    """SIGKILL a process in the middle of appending: exp.csv holds whole appends only."""
    import csv
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "exp.csv"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 20
        # Kill it once a temporary file exists, i.e. while an append is being written.
        while not list(tmp_path.glob(".exp.csv.*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.002)
        assert list(tmp_path.glob(".exp.csv.*.tmp")), "the writer never started an append"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    rows = list(csv.reader(path.open(newline=""))) if path.exists() else []
    if rows:
        assert rows[0] == ["exp", "rate", "desc"]
        assert (len(rows) - 1) % 20000 == 0 and all(len(r) == 3 for r in rows)
    # The next append removes the dead writer's debris and adds its rows.
    append_rows(path, parse_fields("exp:one\nrate:sum\ndesc:one\n"), [{"exp": "9.0", "rate": "1", "desc": "d"}])
    assert not list(tmp_path.glob(".exp.csv.*.tmp"))
    assert path.read_text().splitlines()[-1] == "9.0,1,d"


def test_corrupted_exp_nc_is_a_results_error_naming_it(processed: Path) -> None:
    """Flipped bytes anywhere in exp.nc: refused, naming the file, before HDF5 reads it
    (the sha256 written beside it; a damaged heap or index made HDF5 loop for ever)."""
    from netesto.results import open_experiment, open_experiments

    nc = processed / "2" / "exp.nc"
    good = nc.read_bytes()
    assert (processed / "2" / "exp.nc.sha256").read_text().split() == [hashlib.sha256(good).hexdigest(), "exp.nc"]
    tries = 0
    for start in range(0, len(good), max(1, len(good) // 80)):
        data = bytearray(good)
        for i in range(start, min(len(data), start + 512), 7):
            data[i] ^= 0x5A
        nc.write_bytes(bytes(data))
        for opener in (lambda: open_experiment(nc), lambda: open_experiments(processed)[2]):
            with pytest.raises(ResultsError, match="damaged: its sha256") as info:
                opener()
            assert str(nc) in str(info.value)
            tries += 1
    assert tries > 100
    nc.write_bytes(good)
    assert float(open_experiment(nc).rate.sum()) > 0


def test_a_missing_flow_end_is_named(workdir: Path) -> None:
    """One end's file of a flow is gone (its host died, a fetch failed): the
    error names the file; the flow is still built from the other end."""
    flows = workdir / "2" / "flows"
    (flows / "h1-h2-1-0.client.nflow").unlink()
    (flows / "h1-h2-1-1.server.nflow").unlink()
    res = process_experiment(workdir, 2)
    assert not res.ok
    joined = "\n".join(res.errors)
    assert f"{flows / 'h1-h2-1-0.client.nflow'}: missing" in joined
    assert f"{flows / 'h1-h2-1-1.server.nflow'}: missing" in joined
    assert "h1-h2-1-0.server.nflow" not in joined and "h1-h2-1-1.client.nflow" not in joined
    assert "h1-h2-1-0.client.nflow: missing" in (workdir / "2" / "errors.txt").read_text()
    from netesto.results import open_experiment

    ds = open_experiment(workdir / "2")
    assert ds.sizes["flow"] == 2 and (ds.rate.values > 0).all()


def test_a_client_that_never_began_has_no_server_end_to_miss(workdir: Path) -> None:
    """Interrupted before its start (or refused by its server), a client leaves a file saying
    ``started: false`` and its server none: that is no lost data, and the flow is named as one
    that never started rather than as a missing file."""
    from netesto.raw.nflow import Column, FlowWriter, read_flow

    flows = workdir / "2" / "flows"
    client = flows / "h1-h2-1-0.client.nflow"
    header = dict(read_flow(client).header)
    columns = [Column(str(n), str(t), str(u)) for n, t, u in header["columns"]]
    for key in ("type", "format", "columns", "byteorder", "record"):
        header.pop(key, None)
    client.unlink()
    FlowWriter(client, columns, {**header, "started": False}).close({})
    (flows / "h1-h2-1-0.server.nflow").unlink()
    res = process_experiment(workdir, 2)
    joined = "\n".join(res.errors)
    assert "h1-h2-1-0.server.nflow" not in joined, res.errors
    from netesto.results import open_experiment

    assert "flow h1-h2-1-0 never started" in open_experiment(workdir / "2").attrs["flow_warnings"]
    # a server end missing beside a client that did begin is still lost data
    (flows / "h1-h2-1-1.server.nflow").unlink()
    again = process_experiment(workdir, 2)
    assert f"{flows / 'h1-h2-1-1.server.nflow'}: missing" in "\n".join(again.errors)


def test_a_driver_without_server_file_is_not_an_error(workdir: Path) -> None:
    """netperf writes no server file: its absence loses nothing."""
    import json

    meta_path = workdir / "2" / "experiment.json"
    meta = json.loads(meta_path.read_text())
    for f in meta["flows"]:
        f["driver"] = "netperf"
    meta_path.write_text(json.dumps(meta))
    for p in (workdir / "2" / "flows").glob("*.server.nflow"):
        p.unlink()
    res = process_experiment(workdir, 2)
    assert res.ok, res.errors


def test_a_missing_host_snapshot_is_named(workdir: Path) -> None:
    """The experiment died before its after-snapshots (1/ never written), or
    one snapshot file is gone: warnings name what is missing and where; the
    rows are still written."""
    import shutil

    shutil.rmtree(workdir / "2" / "1")
    (workdir / "3" / "1" / "h1.ifstat").unlink()
    (workdir / "3" / "0" / "h2.snmp").write_text("")
    res2 = process_experiment(workdir, 2)
    joined = "\n".join(res2.warnings)
    for host in ("h1", "h2"):
        assert f"{workdir / '2' / '1' / host}.*: missing" in joined
    res3 = process_experiment(workdir, 3)
    joined = "\n".join(res3.warnings)
    assert f"{workdir / '3' / '1' / 'h1.ifstat'}: missing" in joined
    assert f"{workdir / '3' / '0' / 'h2.snmp'}: empty" in joined
    assert len(res3.warnings) == 2 and res2.ok and res3.ok
    assert len((workdir / "exp.csv").read_text().splitlines()) == 3


def _blocks(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each block of a .nflow file (docs/raw-format.md:
    a 12-byte preamble, then blocks of u32 length, u32 crc32, payload)."""
    import struct

    out, pos = [], 12
    while pos < len(data):
        length, _crc = struct.unpack_from("<II", data, pos)
        out.append((pos, pos + 8 + length))
        pos += 8 + length
    return out


def test_a_writer_killed_between_blocks_is_named(workdir: Path) -> None:
    """A writer killed between two blocks leaves a file that ends on a block
    boundary, with no summary: it is not "truncated", but it is incomplete,
    and the warning says so; its samples are kept."""
    p = workdir / "2" / "flows" / "h1-h2-1-0.client.nflow"
    data = p.read_bytes()
    blocks = _blocks(data)
    assert len(blocks) > 4 and blocks[-1][1] == len(data)
    p.write_bytes(data[: blocks[len(blocks) // 2][1]])  # no summary, half the samples
    res = process_experiment(workdir, 2)
    assert res.ok
    hits = [w for w in res.warnings if w.startswith(f"{p}: ")]
    assert len(hits) == 1 and "no summary" in hits[0], res.warnings
    assert "no summary" in (workdir / "2" / "errors.txt").read_text()
    from netesto.results import open_experiment

    ds = open_experiment(workdir / "2")
    assert ds.sizes["flow"] == 2 and float(ds.rate.sel(flow="h1-h2-1-0")) > 0


def test_corrupted_exp_nc_never_gives_other_numbers(processed: Path) -> None:
    """exp.nc's numeric variables carry checksums: flipped bytes in them are
    refused on opening (ResultsError naming the file), never read as numbers
    that differ from what was written."""
    from netesto.results import open_experiment

    nc = processed / "2" / "exp.nc"
    ref = open_experiment(nc)
    numeric = [v for v in ref.variables if ref[v].dtype.kind in "fiub"]
    good = nc.read_bytes()
    changed, refused = [], 0
    for start in range(0, len(good), max(1, len(good) // 120)):
        data = bytearray(good)
        for i in range(start, min(len(data), start + 512), 7):
            data[i] ^= 0x5A
        nc.write_bytes(bytes(data))
        try:
            ds = open_experiment(nc)
        except ResultsError as exc:
            assert str(nc) in str(exc)
            refused += 1
            continue
        changed += [(start, v) for v in numeric if v not in ds.variables or not ds[v].equals(ref[v])]
    assert not changed
    assert refused > 10


def test_a_flow_stopped_half_way_is_named(tmp_path: Path, capsys) -> None:
    """A real flow (the engine over loopback) stopped half-way: both ends
    write their summary with status "error"; the warnings (and stderr) name
    each file and the engine's reason, and the samples are kept."""
    import json
    import signal
    import subprocess
    import sys

    engine = [sys.executable, "-m", "netesto.engine"]
    stage = tmp_path / "stage"
    stage.mkdir()
    server = subprocess.Popen([*engine, "server", "--bind", "127.0.0.1", "--port", "0",
                               "--datadir", str(stage / "srv")], stdout=subprocess.PIPE, text=True)
    client = None
    try:
        port = json.loads(server.stdout.readline())["port"]  # type: ignore[union-attr]
        spec = {"flow_id": "h1-h2-1-0", "test": "TCP_STREAM", "server": "127.0.0.1", "port": port,
                "ca": "cubic", "dur": 30, "interval": 0.01, "exp": 4}
        (stage / "specs.json").write_text(json.dumps([spec]))
        client = subprocess.Popen([*engine, "client", "--specs", str(stage / "specs.json"),
                                   "--datadir", str(stage / "cli")], stdout=subprocess.PIPE, text=True)
        for line in client.stdout:  # type: ignore[union-attr]
            if json.loads(line).get("event") == "progress":  # 1 s of data sent
                break
        client.send_signal(signal.SIGTERM)
        client.communicate(timeout=60)
    finally:
        for proc in (client, server):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=60)
    flows = tmp_path / "work" / "4" / "flows"
    flows.mkdir(parents=True)
    for p in stage.glob("*/4/flows/*.nflow"):
        p.rename(flows / p.name)
    res = process_experiment(tmp_path / "work", 4)
    for side in ("client", "server"):
        hits = [w for w in res.warnings if w.startswith(f"{flows / f'h1-h2-1-0.{side}.nflow'}: ended in error")]
        assert len(hits) == 1, res.warnings
    assert any("SIGTERM" in w for w in res.warnings)
    assert "ended in error" in capsys.readouterr().err
    assert "ended in error" in (tmp_path / "work" / "4" / "errors.txt").read_text()
    assert float(res.rows[0]["rate"]) > 0
