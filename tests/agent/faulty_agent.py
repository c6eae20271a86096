"""A test-only agent entry point with faults switched on by environment variables.

``python -m tests.agent.faulty_agent`` takes the agent's command line; the
shipped agent knows nothing of these switches (as jupyter_client keeps its
problem kernels in its tests). ``NETESTO_AGENT_FAULT``, comma-separated:

- ``drop-replies``: handle requests but never answer
- ``slow``: sleep ``NETESTO_AGENT_FAULT_DELAY`` seconds (default 2) before each reply
- ``crash-on-start``: exit with status 3 before binding
- ``corrupt-chunk``: damage fetched data after its checksum was computed

``NETESTO_AGENT_PROTOCOL_VERSION`` makes the agent speak another protocol version.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import replace

from netesto.agent import cli, server
from netesto.agent.config import AgentConfig
from netesto.agent.handlers import Handlers
from netesto.protocol.commands import FetchChunkArgs
from netesto.protocol.replies import ChunkReply
from netesto.protocol.version import PROTOCOL_VERSION

FAULTS = ("corrupt-chunk", "crash-on-start", "drop-replies", "slow")
log = logging.getLogger("netesto.agent")


def faults() -> set[str]:
    """The faults ``NETESTO_AGENT_FAULT`` switches on (an unknown name is an error)."""
    on = {f.strip() for f in os.environ.get("NETESTO_AGENT_FAULT", "").split(",") if f.strip()}
    if on - set(FAULTS):
        raise SystemExit(f"unknown NETESTO_AGENT_FAULT {sorted(on - set(FAULTS))}; known: {', '.join(FAULTS)}")
    return on


class FaultyHandlers(Handlers):
    """Handlers whose fetched chunks are damaged after their checksum (``corrupt-chunk``)."""

    def cmd_fetch_chunk(self, args: FetchChunkArgs) -> ChunkReply:
        out = super().cmd_fetch_chunk(args)
        data = out.data
        if data:
            out = replace(out, data=bytes([data[0] ^ 0xFF]) + data[1:])  # the client must notice
        return out


class FaultyAgent(server.Agent):
    """The agent with the faults of ``NETESTO_AGENT_FAULT`` and the protocol version of
    ``NETESTO_AGENT_PROTOCOL_VERSION``."""

    def __init__(self, config: AgentConfig) -> None:
        super().__init__(config, version=os.environ.get("NETESTO_AGENT_PROTOCOL_VERSION", PROTOCOL_VERSION))
        self.faults = faults()
        self.delay = float(os.environ.get("NETESTO_AGENT_FAULT_DELAY", "2"))
        if "corrupt-chunk" in self.faults:
            self.handlers = FaultyHandlers(self)

    def _send_frame(self, identity: bytes, data: bytes, rid: int) -> None:
        if "drop-replies" in self.faults:
            return
        if "slow" in self.faults:
            time.sleep(self.delay)
        super()._send_frame(identity, data, rid)


def run(config: AgentConfig) -> int:
    if "crash-on-start" in faults():
        log.error("fault injected: crash-on-start")
        return 3
    return server.run(config, agent_class=FaultyAgent)


if __name__ == "__main__":
    sys.exit(cli.main(run=run))
