"""``python -m netesto.engine server|client``: the flow engine's subprocess entry points (used by the agent)."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from netesto.errors import NetestoError


def int_within(low: int, high: int | None, what: str) -> Callable[[str], int]:
    """An argparse type: an integer in low..high (high None: no upper bound)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value
    return parse


PORT = int_within(0, 65535, "a port 0..65535 (0 = any)")
WORKERS = int_within(0, None, "0 or more (0 = automatic)")


def add_arguments(
    parser: argparse.ArgumentParser, datadir: str | None = None, client_help: str = "run the flows of a JSON spec file"
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The ``server`` and ``client`` subcommands (shared with ``netesto flow``); returns their
    parsers. ``datadir``: a default for ``--datadir`` (None: the option is required, as agents give it);
    ``client_help``: what ``client`` does (``netesto flow``'s also takes flows from its command line).
    """
    sub = parser.add_subparsers(dest="role", required=True, metavar="server|client")
    where = {"default": datadir} if datadir else {"required": True}
    server_help = "serve flows of every test type (the netserver)"
    srv = sub.add_parser("server", help=server_help, description=server_help)
    srv.add_argument("--bind", default="0.0.0.0", help="address to listen on (default all)")
    srv.add_argument("--port", type=PORT, default=12867, help="test port (0 = any, printed)")
    srv.add_argument("--datadir", **where, help="raw files go to DATADIR/<exp>/flows/")
    srv.add_argument("--token", action="append", default=[], help="accepted per-experiment token (repeatable)")
    srv.add_argument("--token-file", help="file of accepted tokens, re-read when it changes")
    srv.add_argument("--workers", type=WORKERS, default=0,
                     help="server processes sharing the port; new flows go to the least loaded "
                          "(default 0: one per usable CPU, at most 8)")
    srv.add_argument("--handshake-timeout", type=float, default=5.0,
                     help="seconds a new connection has to complete its handshake")
    cli = sub.add_parser("client", help=client_help, description=client_help)
    cli.add_argument("--specs", required=datadir is None,
                     help="JSON list of FlowSpec dicts ('-': its path on a line of stdin, read once imported)")
    cli.add_argument("--datadir", **where, help="raw files go to DATADIR/<exp>/flows/")
    cli.add_argument("--workers", type=WORKERS, default=None, help="worker processes (default min(2, flows))")
    for role in (srv, cli):  # bench_sampling's within-run comparison only: sample every other W-second window
        role.add_argument("--sample-duty", type=float, default=0.0, metavar="W", help=argparse.SUPPRESS)
    return srv, cli


def run(args: argparse.Namespace) -> int:
    if args.role == "server":
        from netesto.engine.serve.server import serve

        return serve(args.bind, args.port, args.datadir, tokens=args.token,
                     token_file=args.token_file, workers=args.workers,
                     handshake_timeout=args.handshake_timeout, sample_duty=args.sample_duty)
    from netesto.engine.serve.workers import load_specs, run_client

    specs = args.specs
    if specs == "-":  # started ahead (netesto.agent.spare): imported, it waits for its specs file's path
        from netesto.procs import SPARE_NAME, SPARE_RUNNING, name_process

        name_process(SPARE_NAME)
        specs = sys.stdin.readline().strip()
        if not specs:
            return 0  # let go unused
        name_process(SPARE_RUNNING)
    return run_client(load_specs(specs), args.datadir, workers=args.workers, sample_duty=args.sample_duty)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netesto.engine", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except NetestoError as exc:
        print(f"netesto.engine {args.role}: error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
