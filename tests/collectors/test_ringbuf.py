"""The ring buffer's pages as trace_pipe_raw hands them out: real pages of tcp_probe & co, and crafted ones."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from netesto.collectors.ringbuf import (
    MISSED_EVENTS,
    MISSED_STORED,
    TYPE_PADDING,
    TYPE_TIME_EXTEND,
    TYPE_TIME_STAMP,
    EventFormat,
    PageLayout,
    page_events,
)
from netesto.collectors.tracesplit import Decoder, spool_pages
from netesto.errors import TrafficError

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"  # captured on Linux 6.18 (tests/data/trace)
NAMES = ("tcp_probe", "tcp_retransmit_skb", "tcp_cong_state_set")


def formats() -> dict[str, EventFormat]:
    return {n: EventFormat.parse((DATA / f"{n}.format").read_text()) for n in NAMES}


def layout() -> PageLayout:
    return PageLayout.parse((DATA / "header_page").read_text())


def pages() -> list[tuple[int, bytes]]:
    with open(DATA / "pages.spool", "rb") as fh:
        return list(spool_pages(fh))


def test_the_header_page_and_formats_read_as_the_kernel_lays_them_out() -> None:
    lay = layout()
    assert (lay.ts_offset, lay.commit_offset, lay.commit_size, lay.data_offset) == (0, 8, 8, 16)
    probe = formats()["tcp_probe"]
    assert probe.fields["snd_cwnd"][:2] == (88, 4) and probe.fields["saddr"][3]  # saddr is an array
    st, order = probe.struct(("snd_cwnd", "sport", "common_type"))
    assert order == ("common_type", "sport", "snd_cwnd") and st.size == 92


def test_a_field_the_kernel_lacks_is_named() -> None:
    with pytest.raises(TrafficError, match="no field bogus"):
        formats()["tcp_probe"].struct(("snd_cwnd", "bogus"))


def test_real_pages_decode_into_two_connections_with_every_event_type() -> None:
    dec = Decoder(layout(), formats())
    for _cpu, page in pages():
        dec.page(page)
    out = dec.out
    assert out.other_types == 0 and out.missed_in_pages == 0
    assert out.events["retransmit"] == 1 and out.events["cong_state"] == 1
    assert out.events["probe"] > 150  # seven pages of ~28
    assert sorted(out.conns) == [("127.0.0.1", 47021, "127.0.0.1", 55754), ("127.0.0.1", 55754, "127.0.0.1", 47021)]
    client = out.conns[("127.0.0.1", 55754, "127.0.0.1", 47021)]
    cols = out.columns(client, "probe")
    assert min(cols["snd_cwnd"]) >= 1 and len(cols["snd_cwnd"]) == client.count("probe")
    assert client.count("retransmit") == 1  # the sender retransmitted; the receiver never did
    stamps = list(client.ns["probe"])
    assert stamps == sorted(stamps)  # one CPU's pages in order: its stamps never go back


def _page(words: list[int], ts: int, flags: int = 0, missed: int | None = None) -> bytes:
    data = b"".join(struct.pack("<I", w) for w in words)
    tail = struct.pack("<Q", missed) if missed is not None else b""
    return struct.pack("<Qq", ts, len(data) | flags) + data + tail


def test_time_extends_absolute_stamps_and_discarded_events() -> None:
    # an event 5 ns in; a time extend of 3 << 27 + 7; an event 1 ns later; a discarded event (padding with
    # a delta) of 8 bytes; an absolute stamp; an event 2 ns after it
    words = [(5 << 5) | 1, 0xAAAA,
             (7 << 5) | TYPE_TIME_EXTEND, 3,
             (1 << 5) | 1, 0xBBBB,
             (1 << 5) | TYPE_PADDING, 8, 0,
             (100 << 5) | TYPE_TIME_STAMP, 2,
             (2 << 5) | 1, 0xCCCC]
    pe = page_events(_page(words, 1000), PageLayout())
    assert [e[0] for e in pe.events] == [1005, 1005 + 7 + (3 << 27) + 1, (100 + (2 << 27)) + 2]
    assert [e[2] for e in pe.events] == [4, 4, 4] and pe.missed == 0


def test_padding_without_a_delta_ends_the_data() -> None:
    words = [(1 << 5) | 1, 1, TYPE_PADDING, 0, (1 << 5) | 1, 2]
    assert len(page_events(_page(words, 0), PageLayout()).events) == 1


def test_events_the_writer_lost_before_a_page_are_counted() -> None:
    _cpu, real = pages()[0]
    commit = struct.unpack_from("<q", real, 8)[0]
    size = commit & 0xFFFFF
    stored = real[:8] + struct.pack("<q", commit | MISSED_EVENTS | MISSED_STORED) + real[16:16 + size] + struct.pack(
        "<Q", 37)
    assert page_events(stored, layout()).missed == 37
    unknown = real[:8] + struct.pack("<q", commit | MISSED_EVENTS) + real[16:]
    assert page_events(unknown, layout()).missed == -1
    dec = Decoder(layout(), formats())
    dec.page(stored)
    dec.page(unknown)
    assert dec.out.missed_in_pages == 38  # a count when stored, at least one when not
