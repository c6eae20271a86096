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
    return "\n".join(out)


def write_lab(path: Path, lab: LabFile) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render_lab(lab))
    tmp.replace(path)
    return path


__all__ = ["LabFile", "LabHost", "render_lab", "write_lab"]
