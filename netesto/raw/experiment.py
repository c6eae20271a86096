"""``<exp>/experiment.json``: the typed, versioned record of one experiment, and the one flow id.

The controller's runner writes it when an experiment is processed; results read
it back. :meth:`ExperimentRecord.from_json` checks the shape of what it reads
and names the bad field (``flows[1].group``); :meth:`ExperimentRecord.to_json`
gives the same JSON object the runner writes (keys in the same order, keys it
does not know kept). A flow's id is composed and parsed in one place,
:class:`FlowId`::

    >>> fid = FlowId.of("h1.lab", "h2.lab", 3, 0)
    >>> str(fid), FlowId.parse("h1-h2-3-0") == fid, FlowId.parse("odd") is None
    ('h1-h2-3-0', True, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from netesto.errors import RawDataError

SCHEMA = 1
FILENAME = "experiment.json"
# the keys a flow's entry starts with (its identity); its parameters follow
FLOW_IDENTITY = ("flow_id", "host", "server", "group", "instance")
# the record's keys in the order the runner writes them
RECORD_KEYS = ("schema", "exp", "exp_name", "script", "desc", "other", "netesto_version", "flows", "hosts",
               "actions", "errors", "interrupted", "seed", "defines", "testbed")


def short_host(name: str) -> str:
    """A host name up to its first '.' (flow ids and group file names use it).

    >>> short_host("h1.mynetwork.com"), short_host("h2")
    ('h1', 'h2')
    """
    return str(name).split(".", 1)[0]


@dataclass(frozen=True)
class FlowId:
    """``<client>-<server>-<group>-<instance>``, host names short: unique within an experiment,
    it names the flow's files on both ends (``flows/<id>.client.nflow``)."""

    client: str
    server: str
    group: int
    instance: int

    @classmethod
    def of(cls, client: str, server: str, group: int, instance: int) -> "FlowId":
        """The id of a flow from ``client`` to ``server`` (full or short host names)."""
        return cls(short_host(client), short_host(server), int(group), int(instance))

    @classmethod
    def parse(cls, text: str) -> "FlowId | None":
        """The id written as ``text``, or None if it is not of that form. A host name with
        '-' is ambiguous here: the client is taken up to the first '-'.

        >>> FlowId.parse("h1-h2-10-2")
        FlowId(client='h1', server='h2', group=10, instance=2)
        """
        parts = str(text).rsplit("-", 2)
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        client, _, server = parts[0].partition("-")
        return cls(client, server, int(parts[1]), int(parts[2]))

    def __str__(self) -> str:
        return f"{self.client}-{self.server}-{self.group}-{self.instance}"


@dataclass(frozen=True)
class FlowEntry:
    """One flow of ``experiment.json``'s ``flows``: who it ran between (typed) and its
    parameters as the runner resolved them (``test``, ``ca``, ``dur``, ... in written order)."""

    flow_id: str
    host: str = ""
    server: str = ""
    group: int | None = None
    instance: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Any, where: str) -> "FlowEntry":
        """The entry ``doc`` (a JSON object); ``where`` names it in errors (``flows[2]``)."""
        if not isinstance(doc, dict):
            raise ValueError(f"'{where}' must be an object, not {type(doc).__name__}")
        flow_id = doc.get("flow_id")
        if not isinstance(flow_id, str) or not flow_id:
            raise ValueError(f"'{where}.flow_id' must be a non-empty string, not {flow_id!r}")
        for key in ("host", "server"):
            if doc.get(key) is not None and not isinstance(doc[key], str):
                raise ValueError(f"'{where}.{key}' must be a string, not {type(doc[key]).__name__}")
        for key in ("group", "instance"):
            value = doc.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"'{where}.{key}' must be a whole number, not {value!r}")
        params = {k: v for k, v in doc.items() if k not in FLOW_IDENTITY}
        return cls(flow_id, doc.get("host") or "", doc.get("server") or "", doc.get("group"), doc.get("instance"),
                   params)

    @property
    def id(self) -> FlowId | None:
        """The parsed :class:`FlowId` of :attr:`flow_id` (None if it is not of that form)."""
        return FlowId.parse(self.flow_id)

    def to_json(self) -> dict[str, Any]:
        return {"flow_id": self.flow_id, "host": self.host, "server": self.server, "group": self.group,
                "instance": self.instance, **self.params}


@dataclass(frozen=True)
class ExperimentRecord:
    """What ``experiment.json`` says of one experiment (see :data:`RECORD_KEYS` for its keys).

    ``other`` is as written: ``[key, value]`` pairs, or PROCESS_EXP's ``k=v,...`` text;
    ``hosts`` maps short host names to what their agents said (kernel, clock offset, ...);
    ``processed`` is the DESC and OTHER the results were last processed with; ``extra``
    keeps keys this version does not know."""

    schema: int = SCHEMA
    exp: int | None = None
    exp_name: str = ""
    script: str = ""
    desc: str = ""
    other: str | tuple[tuple[Any, Any], ...] = ()
    netesto_version: str = ""
    flows: tuple[FlowEntry, ...] = ()
    hosts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    actions: tuple[Any, ...] = ()
    errors: tuple[Any, ...] = ()
    interrupted: bool = False
    seed: int | None = None
    defines: Mapping[str, Any] = field(default_factory=dict)
    testbed: Mapping[str, Any] = field(default_factory=dict)
    processed: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Any) -> "ExperimentRecord":
        """The record of the JSON object ``doc``; a ValueError naming the bad field otherwise."""
        if not isinstance(doc, dict):
            raise ValueError("experiment description is not a JSON object")
        schema = doc.get("schema", SCHEMA)
        if schema != SCHEMA:
            raise ValueError(f"'schema' {schema!r}: this netesto reads version {SCHEMA}")
        for key, kind, what in (("hosts", dict, "an object"), ("flows", list, "a list"),
                                ("defines", dict, "an object"), ("testbed", dict, "an object"),
                                ("processed", dict, "an object"), ("actions", list, "a list"),
                                ("errors", list, "a list")):
            if doc.get(key) is not None and not isinstance(doc[key], kind):
                raise ValueError(f"'{key}' must be {what}, not {type(doc[key]).__name__}")
        hosts = doc.get("hosts") or {}
        for name, info in hosts.items():
            if info is not None and not isinstance(info, dict):
                raise ValueError(f"'hosts.{name}' must be an object, not {type(info).__name__}")
        exp = doc.get("exp")
        if exp is not None:
            try:
                exp = int(exp)
            except (TypeError, ValueError):
                raise ValueError(f"'exp' must be a whole number, not {exp!r}") from None
        seed = doc.get("seed")
        return cls(
            schema=SCHEMA, exp=exp, exp_name=str(doc.get("exp_name") or ""), script=str(doc.get("script") or ""),
            desc=str(doc.get("desc") or ""), other=_other(doc.get("other")),
            netesto_version=str(doc.get("netesto_version") or ""),
            flows=tuple(FlowEntry.from_json(f, f"flows[{i}]") for i, f in enumerate(doc.get("flows") or [])),
            hosts={str(k): dict(v or {}) for k, v in hosts.items()},
            actions=tuple(doc.get("actions") or ()), errors=tuple(doc.get("errors") or ()),
            interrupted=bool(doc.get("interrupted", False)),
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            defines=dict(doc.get("defines") or {}), testbed=dict(doc.get("testbed") or {}),
            processed=doc.get("processed"),
            extra={k: v for k, v in doc.items() if k not in RECORD_KEYS and k != "processed"},
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the record, keys in the runner's order."""
        out: dict[str, Any] = {
            "schema": self.schema, "exp": self.exp, "exp_name": self.exp_name, "script": self.script,
            "desc": self.desc, "other": self.other if isinstance(self.other, str) else [list(p) for p in self.other],
            "netesto_version": self.netesto_version, "flows": [f.to_json() for f in self.flows],
            "hosts": {k: dict(v) for k, v in self.hosts.items()}, "actions": list(self.actions),
            "errors": list(self.errors), "interrupted": self.interrupted, "seed": self.seed,
            "defines": dict(self.defines), "testbed": dict(self.testbed),
        }
        if self.processed is not None:
            out["processed"] = dict(self.processed)
        out.update(self.extra)
        return out

    def clock_offset(self, host: str) -> float:
        """Agent clock minus controller clock for ``host`` (0 if unknown)."""
        info = self.hosts.get(host) or self.hosts.get(short_host(host)) or {}
        try:
            out = float(info.get("clock_offset", 0.0) or 0.0)
        except (TypeError, ValueError):
            return 0.0
        return out if out == out and abs(out) != float("inf") else 0.0


def _other(value: Any) -> str | tuple[tuple[Any, Any], ...]:
    """``other`` as written: text, or [key, value] pairs (else a ValueError naming it)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        return tuple((p[0], p[1]) for p in value)
    raise ValueError(f"'other' must be [key, value] pairs or 'k=v,...' text, not {value!r}")


def read_experiment(path: str | Path) -> ExperimentRecord | None:
    """The record in ``path`` (an ``experiment.json``), None if there is none; a
    :class:`RawDataError` naming the file, and the field, if it cannot be read."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RawDataError(f"cannot read experiment description: {exc}", path=str(p)) from exc
    try:
        return ExperimentRecord.from_json(doc)
    except ValueError as exc:
        raise RawDataError(str(exc), path=str(p)) from None


__all__ = ["FILENAME", "FLOW_IDENTITY", "RECORD_KEYS", "SCHEMA", "ExperimentRecord", "FlowEntry", "FlowId",
           "read_experiment", "short_host"]
