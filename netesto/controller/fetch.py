"""GET_DATA's transfer: an experiment's files from an agent, in checksummed, pipelined chunks.

Chunks are checked against their crc32 and each file against its whole digest;
files are written to ``.part`` and renamed, and an interrupted fetch resumes from
the ``.part`` length. Nothing is acknowledged (so the agent keeps everything) until
every file is on our disk.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import zlib
from collections import deque
from pathlib import Path

from netesto.controller.connection import AgentConnection
from netesto.errors import NetestoError, ProtocolError, StorageError
from netesto.protocol.codec import CHUNK_SIZE
from netesto.protocol.commands import AckArgs, FetchChunkArgs, FetchListArgs
from netesto.protocol.replies import AckReply, ChunkReply, FetchListReply, FileEntry

log = logging.getLogger("netesto.controller.client")
FETCH_WINDOW = 4  # chunk requests in flight: hides the round trip behind the transfer


def fetch_experiment(conn: AgentConnection, exp: int | str, dest_dir: str | Path, *, ack: bool = True) -> list[Path]:
    """Copy every file of ``<agent datadir>/<exp>/`` into ``dest_dir`` (same relative paths);
    ``ack`` (once everything is on our disk) lets the agent delete its copy."""
    listing = conn.call(FetchListReply, FetchListArgs(exp))  # every entry checked before anything is written
    chunk = listing.chunk or CHUNK_SIZE
    dest = Path(dest_dir)
    out = []
    for entry in listing.files:
        try:
            out.append(_fetch_file(conn, exp, entry, dest, chunk))
        except OSError as exc:  # our disk, not the agent: it keeps the file (nothing acknowledged)
            raise StorageError(f"cannot store {entry.path} of experiment {exp} from {conn.name} "
                               f"in {dest}: {exc.strerror or exc}; the agent keeps it (fetch it with "
                               "'netesto run --collect' into a directory with room)") from exc
    if ack:
        if listing.flows_running:
            log.warning("%s: exp %s still has running flows; not acknowledging", conn.where, exp)
        else:
            conn.call(AckReply, AckArgs(exp))
    return out


def _fetch_file(conn: AgentConnection, exp: int | str, entry: FileEntry, dest: Path, chunk: int) -> Path:
    rel = entry.path
    target = (dest / rel).resolve()
    if dest.resolve() not in target.parents:
        raise ProtocolError(f"{conn.where}: refusing file path {rel!r} outside {dest}")
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    size, want = entry.size, entry.sha256
    whole = hashlib.sha256()
    offset = 0
    if part.exists() and part.stat().st_size <= size:
        with open(part, "rb") as f:  # resume: the prefix we have counts toward the digest
            while block := f.read(1 << 20):
                whole.update(block)
        offset = part.stat().st_size
    with open(part, "r+b" if offset else "wb") as f:
        f.seek(offset)
        retries = 0
        while offset < size:
            with conn.lock:
                deadline = time.monotonic() + max(conn.timeout, 10.0)
                pending: deque[tuple[int, int]] = deque()
                nxt = offset
                bad = False
                while (pending or nxt < size) and not bad:
                    while nxt < size and len(pending) < FETCH_WINDOW:
                        want_len = min(chunk, size - nxt)  # never past the listed size (a growing file)
                        chunk_args = FetchChunkArgs(exp, rel, nxt, want_len).to_wire()
                        rid = conn.send_request("fetch_chunk", chunk_args, deadline)
                        pending.append((rid, nxt))
                        nxt += chunk
                    rid, at = pending.popleft()
                    got = conn.read(ChunkReply, conn.reply_value(conn.receive_reply(rid, "fetch_chunk", deadline),
                                                                 f"fetch {rel}"))
                    data = got.data
                    if not data:
                        raise ProtocolError(f"{conn.where}: {rel} ended at {at} bytes, expected {size}")
                    # A short chunk (file changed under us) would misplace the pipelined
                    # ones after it: treat it like a damaged one and re-request from here.
                    if (zlib.crc32(data) != got.crc32 or got.offset != at
                            or len(data) != min(chunk, size - at)):
                        bad = True
                        break
                    f.write(data)
                    whole.update(data)
                    offset = at + len(data)
                    deadline = time.monotonic() + max(conn.timeout, 10.0)
                for rid, _ in pending:  # the window after a bad chunk: collect and drop
                    try:
                        conn.receive_reply(rid, "fetch_chunk", deadline)
                    except NetestoError:
                        break
            if bad:
                retries += 1
                log.warning("%s: chunk of %s at %d failed its checksum (try %d)", conn.where, rel, offset, retries)
                if retries >= 3:
                    raise ProtocolError(f"{conn.where}: chunk of {rel} at offset {offset} failed its crc32 check "
                                        f"{retries} times; the agent keeps the data (not acknowledged)")
                f.seek(offset)
                f.truncate()
        f.flush()
        os.fsync(f.fileno())
    if whole.hexdigest() != want:
        part.unlink()
        raise ProtocolError(f"{conn.where}: {rel} failed its whole-file sha256 check; the agent keeps the data")
    os.replace(part, target)
    return target


__all__ = ["FETCH_WINDOW", "fetch_experiment"]
