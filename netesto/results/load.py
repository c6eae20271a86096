"""Raw experiment directory -> per-flow records (both ends, ping, host snapshots).

Reads ``<exp>/experiment.json`` (a :class:`~netesto.raw.experiment.ExperimentRecord`),
``<exp>/flows/<flow_id>.{client,server}.nflow``,
``<exp>/ping/<client>-<server>.nflow`` and ``<exp>/{0,1}/<host>.*``. A file
that cannot be decoded, or is missing while its counterpart (the flow's other
end, the host's other snapshot) exists, is reported in
:attr:`ExperimentRaw.errors` (the message names the file) and everything
else is still loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netesto.errors import RawDataError, ResultsError
from netesto.raw.experiment import (
    FILENAME,
    FLOW_IDENTITY,
    ExperimentRecord,
    FlowEntry,
    FlowId,
    read_experiment,
)
from netesto.raw.nflow import RawFlow, read_flow
from netesto.results.expcsv import parse_other
from netesto.results.hostfiles import HostSnapshot, read_snapshot


@dataclass
class FlowRecord:
    """One flow: its parameters and the raw samples of each end (None if absent)."""

    flow_id: str
    meta: dict[str, Any]
    client: RawFlow | None = None
    server: RawFlow | None = None

    @property
    def test(self) -> str:
        return str(self.meta.get("test", "TCP_STREAM"))

    @property
    def sender(self) -> RawFlow | None:
        """The end whose socket carries the data (server for TCP_MAERTS); None
        if its file is missing (the receiver's TCP state would mislead)."""
        return self.server if self.test == "TCP_MAERTS" else self.client

    @property
    def receiver(self) -> RawFlow | None:
        """The end that receives the data; None if that file is missing."""
        return self.client if self.test == "TCP_MAERTS" else self.server


@dataclass
class ExperimentRaw:
    """Everything read from one ``<workdir>/<exp>/`` directory."""

    path: Path
    exp: int
    record: ExperimentRecord  # experiment.json (empty when there is none)
    other: list[tuple[str, str]] = field(default_factory=list)  # its OTHER pairs
    flows: list[FlowRecord] = field(default_factory=list)
    pings: dict[str, RawFlow] = field(default_factory=dict)
    before: dict[str, HostSnapshot] = field(default_factory=dict)
    after: dict[str, HostSnapshot] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def clock_offset(self, host: str) -> float:
        """Agent clock minus controller clock for ``host`` (0 if unknown)."""
        return self.record.clock_offset(host)


def _read_record(path: Path) -> tuple[ExperimentRecord, list[tuple[str, str]]]:
    """experiment.json's record (an empty one without the file) and its OTHER pairs."""
    try:
        record = read_experiment(path)
    except RawDataError as exc:
        raise ResultsError(exc.message) from exc
    if record is None:
        return ExperimentRecord(), []
    try:
        # PROCESS_EXP's "k=v,..." text or [key, value] pairs -> pairs
        other = parse_other(record.other)
    except ResultsError as exc:
        raise ResultsError(f"{path}: 'other': {exc.message}") from None
    return record, other


def _flow_params(flow_id: str, entry: FlowEntry | None, client: RawFlow | None,
                 server: RawFlow | None) -> dict[str, Any]:
    """A flow's parameters: experiment.json's entry, else what the id and the files' headers say."""
    params: dict[str, Any] = {}
    for side in (server, client):  # the client's header wins over the server's
        if side is not None and isinstance(side.header.get("flow"), dict):
            params.update(side.header["flow"])
    # A header's "server" is the address flows used; the id has the host names.
    fid = FlowId.parse(flow_id)
    if fid is not None:
        params.update(host=fid.client, server=fid.server, group=fid.group, instance=fid.instance)
    if entry is not None:
        # the entry's identity where it has one (a hand-written entry may lack host or group)
        params.update({k: v for k, v in entry.to_json().items() if k not in FLOW_IDENTITY or v not in (None, "")})
    params["flow_id"] = flow_id
    return params


def _try_read(path: Path, raw: ExperimentRaw) -> RawFlow | None:
    if not path.exists():
        return None
    try:
        flow = read_flow(path)
    except RawDataError as exc:
        raw.errors.append(str(exc))
        return None
    for damage in flow.damaged:  # a bad block loses only what it held
        raw.warnings.append(f"{path}: damaged: {damage}; kept {flow.rows} samples")
    if flow.truncated:
        raw.warnings.append(f"{path}: truncated (last block cut short); kept {flow.rows} samples")
    elif flow.summary is None:
        # Every writer ends its file with a summary: a file that stops on a
        # block boundary without one was cut as surely as a truncated one.
        raw.warnings.append(f"{path}: no summary block (its writer stopped before the end); "
                            f"kept {flow.rows} samples")
    elif str(flow.summary.get("status") or "ok") != "ok":
        # e.g. stopped by a signal half-way: complete file, incomplete flow
        why = flow.summary.get("error") or flow.summary.get("status")
        raw.warnings.append(f"{path}: ended in error: {why}; kept {flow.rows} samples")
    return flow


def load_experiment(expdir: str | os.PathLike[str]) -> ExperimentRaw:
    """Read an experiment directory (see the module docstring)."""
    path = Path(expdir)
    if not path.is_dir():
        raise ResultsError(f"{path}: no such experiment directory")
    record, other = _read_record(path / FILENAME)
    exp = record.exp if record.exp is not None else int(path.name) if path.name.isdigit() else 0
    raw = ExperimentRaw(path=path, exp=exp, record=record, other=other)
    flows_dir = path / "flows"
    listed: dict[str, FlowEntry | None] = {f.flow_id: f for f in record.flows}
    # Files not described by experiment.json still count (e.g. a lost json).
    if flows_dir.is_dir():
        for p in sorted(flows_dir.glob("*.nflow")):
            flow_id = p.name.rsplit(".", 2)[0]
            listed.setdefault(flow_id, None)
    for flow_id, entry in listed.items():
        client = _try_read(flows_dir / f"{flow_id}.client.nflow", raw)
        server = _try_read(flows_dir / f"{flow_id}.server.nflow", raw)
        if client is None and server is None:
            if not any(flow_id in e for e in raw.errors):
                raw.errors.append(f"{flows_dir / flow_id}.client.nflow: no data for flow {flow_id}")
            continue
        merged = _flow_params(flow_id, entry, client, server)
        _check_flow_ends(flows_dir, flow_id, merged, client, server, raw)
        raw.flows.append(FlowRecord(flow_id, merged, client, server))
    ping_dir = path / "ping"
    if ping_dir.is_dir():
        for p in sorted(ping_dir.glob("*.nflow")):
            flow = _try_read(p, raw)
            if flow is not None:
                raw.pings[p.name[: -len(".nflow")]] = flow
    for order, target in (("0", raw.before), ("1", raw.after)):
        d = path / order
        if d.is_dir():
            hosts = sorted({p.name.rsplit(".", 1)[0] for p in d.iterdir() if "." in p.name})
            for host in hosts:
                target[host] = read_snapshot(d, host)
    _check_snapshots(path, raw)
    return raw


def _check_flow_ends(flows_dir: Path, flow_id: str, meta: dict[str, Any],
                     client: RawFlow | None, server: RawFlow | None, raw: ExperimentRaw) -> None:
    """Name an end's file that is absent while the other end's is there (its
    host died, a fetch failed). Only the built-in engine always writes a
    server file (netperf never does, iperf3 not always), and a client that
    never began (its file says ``started: false``: stopped before its start,
    or it could not connect) has no server end to lose."""
    ends = {"client": client, "server": server}
    for side, flow in ends.items():
        p = flows_dir / f"{flow_id}.{side}.nflow"
        if flow is not None or p.exists():  # read, or unreadable and reported already
            continue
        if side == "server" and (str(meta.get("driver") or "builtin") != "builtin"
                                 or (client is not None and client.header.get("started") is False)):
            continue
        if str(meta.get("driver")) == "watch":  # a watched socket: its peer's host may be no lab host
            continue
        other = "server" if side == "client" else "client"
        raw.errors.append(f"{p}: missing (flow {flow_id} has only its {other} end's data)")


def _snapshot_files(d: Path) -> dict[str, dict[str, int]]:
    """host -> {suffix: size} of the snapshot files in ``d`` (empty if no ``d``)."""
    out: dict[str, dict[str, int]] = {}
    if d.is_dir():
        for p in d.iterdir():
            if "." in p.name and p.is_file():
                host, _, suffix = p.name.rpartition(".")
                out.setdefault(host, {})[suffix] = p.stat().st_size
    return out


def _check_snapshots(path: Path, raw: ExperimentRaw) -> None:
    """Name host snapshot files of ``0/`` without their ``1/`` counterpart
    (or the reverse) and files that are empty where their counterpart is not:
    the collectors write the same files before and after, so an asymmetry is
    usually lost data (the experiment died before its after-snapshots). A
    warning, not an error: a script may take only one of the two, and the
    counters it lacks are blank, not wrong."""
    dirs = {o: path / o for o in ("0", "1")}
    files = {o: _snapshot_files(d) for o, d in dirs.items()}
    for order, other in (("0", "1"), ("1", "0")):
        mine, theirs = files[order], files[other]
        for host in sorted(theirs):
            if host not in mine:
                raw.warnings.append(f"{dirs[order] / host}.*: missing (no snapshot of {host} here; "
                                  f"{dirs[other] / host}.* exists)")
                continue
            for suffix in sorted(theirs[host]):
                size = mine[host].get(suffix)
                if size is None:
                    raw.warnings.append(f"{dirs[order] / host}.{suffix}: missing "
                                      f"({dirs[other] / host}.{suffix} exists)")
                elif size == 0 and theirs[host][suffix] > 0:
                    raw.warnings.append(f"{dirs[order] / host}.{suffix}: empty "
                                      f"({dirs[other] / host}.{suffix} is not)")


__all__ = ["ExperimentRaw", "FlowRecord", "load_experiment"]
