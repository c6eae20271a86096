"""Writes lab files: the TOML that `netesto run --lab` and the notebook read.

The format is the one in the team contract (``[lab]`` plus one ``[hosts.X]``
table per agent); key paths are relative to the lab file. The one writer of
lab files, next to its reader (``netesto.controller.lab``): ``Lab.to_toml``
renders through it, and the testbed writes the labs it sets up with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

# The [testbed] table: the bottleneck of the testbed a lab is, in the units a result's
# parameters take (bits/s, ms, bytes, a fraction, ms; host_rtt: {host: ms} of the hosts with
# an RTT of their own). It is the file's last table.
TESTBED_KEYS = ("name", "mode", "bw", "rtt", "buffer", "loss", "jitter", "host_rtt")


@dataclass(frozen=True)
class LabHost:
    """One agent of a lab."""

    name: str
    control: str
    port: int = 12870
    test: str = ""  # the address flows use; empty = control
    public_key: str = ""
    role: str = ""  # "router" for an agent that is not a flow endpoint
    shape_agent: str = ""
    shape_dev: str = ""
    dev: str = ""  # the host's own test interface


@dataclass(frozen=True)
class LabFile:
    """A whole lab: name, controller key, hosts."""

    name: str
    controller_key: str = ""
    insecure: bool = False
    host_suffix: str = ""
    hosts: tuple[LabHost, ...] = ()
    comments: tuple[str, ...] = field(default=())
    testbed: Mapping[str, Any] = field(default_factory=dict)  # TESTBED_KEYS; empty for a lab of real hosts


def _q(value: str) -> str:
    # TOML basic strings share JSON's escapes for everything we write.
    return json.dumps(value)


def render_lab(lab: LabFile) -> str:
    """The lab file's text.

    >>> print(render_lab(LabFile("tb", "keys/controller.key_secret",
    ...     hosts=(LabHost("h1", "10.1.1.1", public_key="keys/h1.key",
    ...                    shape_agent="router", shape_dev="r-h1"),))))
    [lab]
    name = "tb"
    host_suffix = ""
    controller_key = "keys/controller.key_secret"
    insecure = false
    <BLANKLINE>
    [hosts.h1]
    control = "10.1.1.1"
    port = 12870
    public_key = "keys/h1.key"
    shape = { agent = "router", dev = "r-h1" }
    <BLANKLINE>
    """
    out = [f"# {c}" for c in lab.comments]
    out += [
        "[lab]",
        f"name = {_q(lab.name)}",
        f"host_suffix = {_q(lab.host_suffix)}",
        *([f"controller_key = {_q(lab.controller_key)}"] if lab.controller_key else []),
        f"insecure = {'true' if lab.insecure else 'false'}",
        "",
    ]
    for host in lab.hosts:
        out.append(f"[hosts.{host.name}]")
        out.append(f"control = {_q(host.control)}")
        out.append(f"port = {host.port}")
        if host.role:
            out.append(f"role = {_q(host.role)}")
        if host.test:  # else the reader takes the control address
            out.append(f"test = {_q(host.test)}")
        if host.public_key:
            out.append(f"public_key = {_q(host.public_key)}")
        if host.shape_agent:
            out.append(f"shape = {{ agent = {_q(host.shape_agent)}, dev = {_q(host.shape_dev)} }}")
        if host.dev:
            out.append(f"dev = {_q(host.dev)}")
        out.append("")
    table = testbed_table(lab.testbed)
    return "\n".join(out) + ("\n" + table if table else "")


def testbed_table(shape: Mapping[str, Any]) -> str:
    """The ``[testbed]`` table of ``shape`` ('' when empty).

    >>> print(testbed_table({"name": "tb", "mode": "netns", "bw": 10_000_000, "rtt": 20.0}), end="")
    [testbed]
    name = "tb"
    mode = "netns"
    bw = 10000000
    rtt = 20.0
    """
    if not shape:
        return ""
    unknown = set(shape) - set(TESTBED_KEYS)
    if unknown:
        raise ValueError(f"[testbed]: unknown keys {sorted(unknown)}; known: {', '.join(TESTBED_KEYS)}")
    lines = ["[testbed]"]
    for key in TESTBED_KEYS:
        if key in shape:
            value = shape[key]
            if isinstance(value, Mapping):  # an inline table, keys quoted (host names may hold dots)
                text = "{ " + ", ".join(f"{_q(str(k))} = {float(v)!r}" for k, v in value.items()) + " }"
            else:
                text = _q(value) if isinstance(value, str) else repr(value)
            lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def update_testbed(path: Path, shape: Mapping[str, Any]) -> Path:
    """Rewrite the ``[testbed]`` table of the lab file at ``path`` (a testbed reshaped in place)."""
    text = path.read_text()
    head = text.split("\n[testbed]\n", 1)[0].rstrip("\n") + "\n\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(head + testbed_table(shape))
    tmp.replace(path)
    return path


def write_lab(path: Path, lab: LabFile) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render_lab(lab))
    tmp.replace(path)
    return path


__all__ = ["LabFile", "LabHost", "TESTBED_KEYS", "render_lab", "testbed_table", "update_testbed", "write_lab"]
