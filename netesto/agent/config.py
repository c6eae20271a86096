"""The agent's configuration: everything its command line sets, checked on construction."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from netesto.agent.auth import is_loopback
from netesto.errors import UsageError
from netesto.protocol.codec import DEFAULT_MAX_MESSAGE

DEFAULT_PORT = 12870


@dataclass(frozen=True)
class AgentConfig:
    """Everything the agent's command line sets."""

    datadir: Path
    bind: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    keys: Path | None = None
    key_name: str | None = None
    authorized: Path | None = None
    allow: Path | None = None
    insecure: bool = False
    lease: float = 30.0
    max_message: int = DEFAULT_MAX_MESSAGE
    name: str = field(default_factory=socket.gethostname)
    test_bind: str = "0.0.0.0"
    flow_port: int = 0
    ready_file: Path | None = None
    netem_fallback: str = ""  # "module:function": a userspace delay line where the kernel has no netem

    def __post_init__(self) -> None:
        if self.insecure and not is_loopback(self.bind):
            raise UsageError(
                f"--insecure is only allowed on a loopback address (127.0.0.1, ::1), not {self.bind!r}: "
                "without CURVE anyone who can reach the port could change this host's qdiscs and sysctls")
        if not 0 <= self.port < 65536:
            raise UsageError(f"bad port {self.port}")
        if not self.lease >= 0:  # also NaN
            raise UsageError(f"bad lease {self.lease}: seconds >= 0 (0 = never expires)")
        if self.max_message < 1024:
            raise UsageError(f"--max-message {self.max_message} is too small (>= 1024 bytes)")


__all__ = ["AgentConfig", "DEFAULT_PORT"]
