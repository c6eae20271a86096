"""The records-block write path: byte-identical to msgpack's, short writes, crc, crash bound."""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest

from netesto.raw.nflow import Column, FlowWriter, RecordLayout, decode_flow, read_flow
from netesto.raw.nflow_format import BLOCK, PREAMBLE

COLS = [Column("t", "d", "s"), Column("x", "Q")]
LAYOUT = RecordLayout(16, (("t", 0), ("x", 8)))
TINY = [Column("x", "Q")]
TINY_LAYOUT = RecordLayout(8, (("x", 0),))
F_SETPIPE_SZ = 1031


class MsgpackWriter(FlowWriter):
    """The writer as it was: every records block through msgpack.packb."""

    def write_records(self, n: int, rec: bytes | bytearray) -> None:
        if n == 0:
            return
        assert self.record is not None and len(rec) == n * self.record.length
        self.flush()
        self._write_block({"type": "records", "n": n, "rec": rec})
        self.rows += n


def records(n: int, start: int = 0) -> bytearray:
    out = bytearray()
    for i in range(start, start + n):
        out += (i * 1_000_003 % (1 << 64)).to_bytes(8, sys.byteorder)
    return out


def write(cls: type[FlowWriter], path: Path, sizes: list[int], **kw: Any) -> bytes:
    with cls(path, TINY, {"side": "client"}, record=TINY_LAYOUT, **kw) as w:
        start = 0
        for n in sizes:
            w.write_records(n, records(n, start))
            start += n
    return path.read_bytes()


def blocks(data: bytes) -> list[bytes]:
    """The raw payloads of a file's blocks (checksums verified)."""
    pos, out = PREAMBLE.size, []
    while pos < len(data):
        length, crc = BLOCK.unpack_from(data, pos)
        payload = data[pos + BLOCK.size : pos + BLOCK.size + length]
        assert zlib.crc32(payload) == crc
        out.append(payload)
        pos += BLOCK.size + length
    return out


# n rows of 8 bytes: n's msgpack int (fixint, uint8, uint16, uint32) and the
# bin header (bin8 < 256 bytes, bin16 < 65536, bin32) both cross their thresholds
SIZES = [1, 31, 32, 127, 128, 255, 256, 8191, 8192, 65535, 65536, 70000]


@pytest.mark.parametrize("n", SIZES)
def test_records_block_is_what_msgpack_writes(tmp_path: Path, n: int) -> None:
    new = write(FlowWriter, tmp_path / "new.nflow", [n])
    old = write(MsgpackWriter, tmp_path / "old.nflow", [n])
    assert new == old
    payload = blocks(new)[1]
    assert payload == msgpack.packb({"type": "records", "n": n, "rec": bytes(records(n))}, use_bin_type=True)
    assert list(read_flow(tmp_path / "new.nflow").columns["x"]) == list(memoryview(records(n)).cast("Q"))


def test_a_whole_file_is_byte_identical(tmp_path: Path) -> None:
    """Header, records blocks of many sizes, appended rows, samples and summary: the same bytes."""
    out = []
    for cls, name in ((FlowWriter, "new"), (MsgpackWriter, "old")):
        path = tmp_path / f"{name}.nflow"
        with cls(path, COLS, {"flow": {"flow_id": "a-b-1-0"}, "side": "server"}, record=LAYOUT, flush_rows=3) as w:
            for k, n in enumerate([1, 20, 16, 4096, 5000]):
                rec = bytearray()
                for i in range(n):
                    rec += struct.pack("=dQ", k * 10_000 + i / 7, k + i)
                w.write_records(n, rec)
                w.append([0.5 + k, k])  # a buffered row goes first into the next block
            w.write_columns(2, {"t": bytes(16), "x": bytes(16)})
            w.close({"status": "ok", "bytes_tx": 123})
        out.append(path.read_bytes())
    assert out[0] == out[1]
    flow = decode_flow(out[0])
    assert flow.rows == 1 + 20 + 16 + 4096 + 5000 + 5 + 2 and not flow.truncated
    assert flow.summary == {"status": "ok", "bytes_tx": 123}


def test_crc_is_checked_by_the_reader(tmp_path: Path) -> None:
    data = bytearray(write(FlowWriter, tmp_path / "f.nflow", [300]))
    assert read_flow(tmp_path / "f.nflow").rows == 300
    data[-100] ^= 0x40  # a bit of the records, covered by the incremental crc
    (tmp_path / "bad.nflow").write_bytes(data)
    flow = read_flow(tmp_path / "bad.nflow")  # the reader sees it and drops that block only
    assert len(flow.damaged) == 1 and "checksum mismatch" in flow.damaged[0]
    assert flow.rows < 300


def test_short_writes_into_a_small_nonblocking_pipe(tmp_path: Path) -> None:
    """A 4 KiB non-blocking pipe takes a 512 KiB block in many short writes and EAGAINs."""
    fifo = tmp_path / "pipe.nflow"
    os.mkfifo(fifo)
    got = bytearray()

    def reader() -> None:
        with open(fifo, "rb", buffering=0) as fh:
            while chunk := fh.read(1000):
                got.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        w = FlowWriter(fifo, TINY, {"side": "client"}, record=TINY_LAYOUT)
        assert w._fd is not None
        fcntl.fcntl(w._fd, F_SETPIPE_SZ, 4096)
        fcntl.fcntl(w._fd, fcntl.F_SETFL, fcntl.fcntl(w._fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        start = 0
        for n in [65536, 3, 300, 9000]:
            w.write_records(n, records(n, start))
            start += n
        w.close({"status": "ok"})
    finally:
        thread.join(30)
    assert not thread.is_alive()
    expected = write(MsgpackWriter, tmp_path / "old.nflow", [65536, 3, 300, 9000])
    # the same header and records blocks as a file written the old way; then the summary
    flow = decode_flow(bytes(got))
    assert flow.rows == 65536 + 3 + 300 + 9000 and not flow.truncated
    assert list(flow.columns["x"]) == list(memoryview(records(start)).cast("Q"))
    assert blocks(bytes(got))[:-1] == blocks(expected)


CHILD = r"""
import sys
from netesto.raw.nflow import Column, FlowWriter, RecordLayout
w = FlowWriter(sys.argv[1], [Column("x", "Q")], {"side": "client"}, record=RecordLayout(8, (("x", 0),)))
n, k = 20, 0
while True:
    w.write_records(n, b"".join((k * n + i).to_bytes(8, sys.byteorder) for i in range(n)))
    k += 1
    print(k * n, flush=True)  # rows the writer has returned from
"""


def test_a_killed_writer_keeps_every_complete_block(tmp_path: Path) -> None:
    path = tmp_path / "killed.nflow"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        for _ in range(200):
            done = int(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    flow = read_flow(path)
    # every block write_records returned from is in the file (the kernel had it), in order
    assert flow.rows >= done >= 4000
    assert list(flow.columns["x"]) == list(range(flow.rows))
