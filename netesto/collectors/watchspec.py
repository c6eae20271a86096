"""What a socket watch samples and where its rows go: :class:`WatchSpec`, and the flow ends it looks for."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from netesto.collectors.sockdiag import DiagSocket, SocketFilter
from netesto.collectors.sockowner import cgroup_id
from netesto.errors import TrafficError
from netesto.protocol.names import check_name


@dataclass(frozen=True)
class FlowMatch:
    """A flow end to find among the sockets: its id, side, and the port (and address) that show it.

    A client end is a socket whose remote port is ``port`` (and remote address ``address``, if
    given); a server end one whose local port is. ``header``: the flow's spec, for its file."""

    flow_id: str
    side: str
    port: int
    address: str = ""
    header: dict[str, Any] = field(default_factory=dict)

    def matches(self, sock: DiagSocket) -> bool:
        end = sock.remote if self.side == "client" else sock.local
        return end[1] == self.port and (not self.address or end[0] == self.address)


@dataclass(frozen=True)
class WatchSpec:
    """One watch: its files' place and name, the filter, the interval, the flows to find."""

    exp: str
    datadir: str
    host: str
    name: str
    interval: float = 0.01
    ports: tuple[int, ...] = ()
    local_ports: tuple[int, ...] = ()
    remote_ports: tuple[int, ...] = ()
    addresses: tuple[str, ...] = ()
    cgroup: str = ""  # a cgroup v2 directory (absolute, or under /sys/fs/cgroup)
    pid: int = 0  # sockets of this process and its descendants only
    flows: tuple[FlowMatch, ...] = ()
    moves: tuple[str, ...] = ()  # files of <exp>/flows/ set aside into <exp>/tool/ at the end

    def __post_init__(self) -> None:
        check_name("watch name", self.name, 40)
        check_name("host", self.host, 64)
        if not 0.001 <= self.interval <= 60:
            raise TrafficError(f"watch {self.name}: interval {self.interval} is outside 0.001..60 s")
        if not (self.ports or self.local_ports or self.remote_ports or self.addresses or self.cgroup or self.pid):
            raise TrafficError(f"watch {self.name}: give ports, addresses, a cgroup or a pid (every socket of a "
                               "host is too many)")
        for flow in self.flows:
            check_name("flow id", flow.flow_id)
            if flow.side not in ("client", "server"):
                raise TrafficError(f"watch {self.name}: flow {flow.flow_id} side {flow.side!r}")
        for move in self.moves:
            check_name("file name", move)

    def socket_filter(self) -> SocketFilter:
        return SocketFilter(tuple(self.ports), tuple(self.local_ports), tuple(self.remote_ports),
                            tuple(self.addresses), cgroup_id(self.cgroup) if self.cgroup else 0)

    @classmethod
    def from_json(cls, text: str) -> "WatchSpec":
        data = json.loads(text)
        for key in ("ports", "local_ports", "remote_ports", "addresses", "moves"):
            data[key] = tuple(data.get(key, ()))
        data["flows"] = tuple(FlowMatch(**f) for f in data.get("flows", ()))
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


__all__ = ["FlowMatch", "WatchSpec"]
