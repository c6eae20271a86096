"""``netesto-agent``: the command line of the lab-host daemon."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from netesto._version import __version__
from netesto.errors import NetestoError
from netesto.protocol.codec import DEFAULT_MAX_MESSAGE
from netesto.protocol.text import PrintableFormatter
from netesto.protocol.version import PROTOCOL_VERSION

if TYPE_CHECKING:
    from netesto.agent.config import AgentConfig


def default_datadir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/netesto-agent")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "netesto-agent"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="netesto-agent",
        description="The netesto lab-host agent: runs flows, sets qdiscs/sysctls, ships data to a controller.",
    )
    p.add_argument("--version", action="version", version=f"netesto-agent {__version__} (protocol {PROTOCOL_VERSION})")
    p.add_argument("--bind", default="0.0.0.0", help="control address to listen on (default 0.0.0.0)")
    p.add_argument("--port", type=int, default=12870, help="control port (default 12870; 0 = any free port)")
    p.add_argument("--keys", type=Path, help="the agent's secret key file (.key_secret) or a directory holding it")
    p.add_argument("--key-name", help="in a --keys directory, use NAME.key_secret")
    p.add_argument("--authorized", type=Path, help="directory of authorized controller public keys (*.key)")
    p.add_argument("--allow", type=Path, help="address allowlist (clients.txt: one address per line, # comments)")
    p.add_argument("--insecure", action="store_true", help="no CURVE (only with a loopback --bind)")
    p.add_argument("--datadir", type=Path, default=None, help=f"experiment data (default {default_datadir()})")
    p.add_argument("--lease", type=float, default=30.0,
                   help="seconds without a controller request before flows stop and changes are undone (0 = never)")
    p.add_argument("--max-message", type=int, default=DEFAULT_MAX_MESSAGE, help="largest accepted message, bytes")
    p.add_argument("--name", default=socket.gethostname(), help="host name used in file names (default: hostname)")
    p.add_argument("--test-bind", default="0.0.0.0", help="address the flow engine's test server listens on")
    p.add_argument("--flow-port", type=int, default=0, help="test server port (default: any free port)")
    p.add_argument("--ready-file", type=Path, help="write the bound port here once listening")
    p.add_argument("--netem-fallback", metavar="MODULE:FUNCTION", default=os.environ.get("NETESTO_NETEM_FALLBACK", ""),
                   help="userspace delay line for SET_NETEM where the kernel has no netem "
                        "(default: $NETESTO_NETEM_FALLBACK)")
    p.add_argument("--log-file", type=Path, help="log here instead of stderr")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def main(argv: Sequence[str] | None = None, *, run: Callable[["AgentConfig"], int] | None = None) -> int:
    """Parse ``argv``, set up logging and serve; ``run`` replaces the server's (tests start faulty agents)."""
    args = build_parser().parse_args(argv)
    handler: logging.Handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler()
    # Messages quote peers (claims, flow ids, errors): one record stays one line, escapes escaped.
    handler.setFormatter(PrintableFormatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    from netesto.agent.config import AgentConfig
    from netesto.agent.server import run as serve

    try:
        config = AgentConfig(
            datadir=args.datadir or default_datadir(), bind=args.bind, port=args.port, keys=args.keys,
            key_name=args.key_name, authorized=args.authorized, allow=args.allow, insecure=args.insecure,
            lease=args.lease, max_message=args.max_message, name=args.name, test_bind=args.test_bind,
            flow_port=args.flow_port, ready_file=args.ready_file, netem_fallback=args.netem_fallback)
        return (run or serve)(config)
    except NetestoError as exc:
        if args.log_file:
            logging.getLogger("netesto.agent").error("%s", exc.format_message())
        print(f"netesto-agent: error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
