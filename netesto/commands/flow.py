"""``netesto flow server|client``: the built-in flow engine without agents, with readable output."""

from __future__ import annotations

import argparse
import re
import socket
import sys
from pathlib import Path
from typing import Any, Callable

from netesto.errors import UsageError
from netesto.engine.__main__ import add_arguments as _engine_arguments
from netesto.engine.__main__ import int_within
from netesto.protocol.flowspec import CRR_CLOSES, FlowSpec
from netesto.vocab import TEST_TYPES

DATADIR = "netesto-flows"
PORT = 12867  # the flow server's default test port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    srv, cli = _engine_arguments(parser, datadir=DATADIR,
                                 client_help="run flows to a flow server: -H HOST [-t TEST -l SECONDS -P N ...], "
                                             "or those of a JSON spec file (--specs)")
    for where in (parser, srv, cli):  # before or after the role: SUPPRESS keeps the role's from resetting it
        where.add_argument("--json", action="store_true", default=False if where is parser else argparse.SUPPRESS,
                           help="print the raw JSON event lines instead of a summary")
    quick = cli.add_argument_group(
        "flows from the command line (instead of --specs)",
        "sizes take K/M/G (2^10...) or k/m/g (10^3...); rates are bits/s with k/M/G (10^3...)",
    )
    quick.add_argument("-H", "--host", help="the flow server's address")
    quick.add_argument("-p", "--port", type=int_within(1, 65535, "a port 1..65535"), default=PORT,
                       help=f"its test port (default {PORT})")
    quick.add_argument("-t", "--test", default="TCP_STREAM", type=str.upper,
                       help=f"one of {', '.join(TEST_TYPES)} (default TCP_STREAM)")
    quick.add_argument("-l", "--dur", type=float, default=10.0, help="seconds (default 10)")
    quick.add_argument("-P", "--instances", type=int, default=1, help="parallel flows (default 1)")
    quick.add_argument("--ca", default="cubic", help="congestion control (default cubic)")
    quick.add_argument("--req", default="1", help="RR request size (default 1)")
    quick.add_argument("--reply", default="1", help="RR reply size (default 1)")
    quick.add_argument("--buffer", default="0", help="local socket buffer (default 0: the kernel's)")
    quick.add_argument("--remote-buffer", default="0", help="the server end's socket buffer")
    quick.add_argument("--pacing", default="0", help="max pacing rate (default 0: none)")
    quick.add_argument("--rate", default="0", help="UDP_STREAM target rate")
    quick.add_argument("--interval", type=float, default=0.01, help="sampling interval, s (default 0.01)")
    quick.add_argument("--crr-close", choices=CRR_CLOSES, default="rst",
                       help="how TCP_CRR ends each connection: rst (default: a reset, no TIME_WAIT, as neper), "
                            "client (the client closes first), server (as netperf: the server first)")
    quick.add_argument("--token", default="", help="the experiment token the server accepts")
    quick.add_argument("--exp", type=int, default=None,
                       help="experiment number of the raw files (default: the next free one in DATADIR)")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  netesto flow server &\n"
        "  netesto flow client -H 127.0.0.1 -t TCP_RR -l 5 --ca bbr\n"
        "  netesto flow client -H 10.0.0.2 -P 4 --pacing 1G\n"
        "  netesto flow client --specs flows.json --datadir /tmp/d\n"
        f"raw files go to DATADIR/<exp>/flows/ (default ./{DATADIR})"
    )


def _value(text: str, what: str, parse: Callable[[str], int]) -> int:
    try:
        return parse(text)
    except ValueError as exc:
        raise UsageError(f"--{what}: {exc}") from None


def next_exp(datadir: str | Path) -> int:
    """The smallest experiment number from 1 up with no directory under ``datadir`` yet."""
    used = {int(p.name) for p in Path(datadir).glob("*") if p.name.isdigit()}
    return next(n for n in range(1, len(used) + 2) if n not in used)


def command_line_specs(args: argparse.Namespace) -> list[FlowSpec]:
    """The FlowSpecs of ``-H host [-t test ...]``: ``--instances`` flows, ids ``<here>-<host>-1-<i>``."""
    from netesto.script.validate import to_bits, to_size

    if args.instances < 1:
        raise UsageError(f"--instances must be >= 1, got {args.instances}")
    here = socket.gethostname().split(".", 1)[0] or "client"
    there = re.sub(r"[^A-Za-z0-9_]+", "_", args.host).strip("_") or "server"
    exp = next_exp(args.datadir) if args.exp is None else args.exp
    common = dict(
        test=args.test, server=args.host, port=args.port, ca=args.ca, dur=args.dur,
        req=_value(args.req, "req", to_size), reply=_value(args.reply, "reply", to_size),
        local_buffer=_value(args.buffer, "buffer", to_size),
        remote_buffer=_value(args.remote_buffer, "remote-buffer", to_size),
        pacing=_value(args.pacing, "pacing", to_bits), rate=_value(args.rate, "rate", to_bits),
        interval=args.interval, token=args.token, exp=exp, crr_close=args.crr_close,
    )
    return [FlowSpec(flow_id=f"{here}-{there}-1-{i}", **common) for i in range(args.instances)]


def _rate(bps: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.2f} {unit}"
    return f"{bps:.0f} bit/s"


def format_event(event: dict[str, Any]) -> str | None:
    """One human line (or a few) for an engine event; None to skip it."""
    kind = event.get("event")
    flow = event.get("flow", "")
    if kind == "listening":
        return f"listening on {event['bind']}:{event['port']} ({event['workers']} worker(s))"
    if kind == "started":
        side = event.get("side", "client")
        remote = ":".join(map(str, event.get("remote", [])))
        return f"{flow}: started ({side}, peer {remote}{', ca ' + event['ca'] if event.get('ca') else ''})"
    if kind == "progress":
        parts = [f"{flow}: {event['t']:6.1f} s"]
        if event.get("tx_bps"):
            parts.append(f"tx {_rate(event['tx_bps'])}")
        if event.get("rx_bps"):
            parts.append(f"rx {_rate(event['rx_bps'])}")
        if event.get("transactions"):
            parts.append(f"{event['transactions']} transactions")
        return "  ".join(parts)
    if kind in ("done", "error"):
        summary = event.get("summary")
        if summary is None:
            if kind == "error":
                return f"{flow}: ERROR {event.get('message', '')}"
            return f"{flow}: done (server side, rx {event.get('bytes_rx', 0)} B, tx {event.get('bytes_tx', 0)} B)"
        lines = [f"{flow}: {'done' if kind == 'done' else 'ERROR ' + event.get('message', '')}"]
        dur = summary.get("duration", 0.0)
        line = f"    {summary.get('test', '')} ca={summary.get('ca') or '-'} {dur:.2f} s"
        if summary.get("bytes_tx"):
            line += f"  tx {summary['bytes_tx']} B ({_rate(summary['rate_tx_bps'])})"
        if summary.get("bytes_rx"):
            line += f"  rx {summary['bytes_rx']} B ({_rate(summary['rate_rx_bps'])})"
        lines.append(line)
        lat = summary.get("latency_us", {})
        if lat.get("count"):
            lines.append(
                f"    {summary['transactions']} transactions ({summary['tps']:.0f}/s)  latency us: "
                f"min {lat['min']:.1f} mean {lat['mean']:.1f} p50 {lat['p50']:.1f} p90 {lat['p90']:.1f} "
                f"p99 {lat['p99']:.1f} p999 {lat['p999']:.1f} max {lat['max']:.1f}"
            )
        if "udp_sent" in summary:
            lines.append(f"    udp sent {summary['udp_sent']} lost {summary.get('udp_lost', 0)} "
                         f"reordered {summary.get('udp_reordered', 0)}")
        cpu = summary.get("cpu", {})
        # A failed flow's share is of the moments it lived (99 % of a core for a refused connect): none shown.
        share = f"{cpu.get('percent', 0):.0f} % of a core, " if kind == "done" else ""
        lines.append(f"    cpu {cpu.get('seconds', 0):.2f} s ({share}{cpu.get('scope', '')}), "
                     f"{summary.get('samples', 0)} samples")
        return "\n".join(lines)
    if kind in ("dropped", "refused"):
        return f"{kind} a connection: {event.get('reason', '')}"
    return None


def total_line(summaries: list[dict[str, Any]]) -> str | None:
    """The sum over the flows' summaries (None for one flow: its own lines say it all).

    >>> total_line([{"rate_tx_bps": 2e6, "transactions": 10, "tps": 5.0},
    ...             {"rate_tx_bps": 1e6, "transactions": 30, "tps": 15.0}])
    'total of 2 flows: tx 3.00 Mbit/s  40 transactions (20/s)'
    """
    if len(summaries) < 2:
        return None
    tx = sum(s.get("rate_tx_bps") or 0.0 for s in summaries)
    rx = sum(s.get("rate_rx_bps") or 0.0 for s in summaries)
    parts = [f"total of {len(summaries)} flows:"]
    if tx:
        parts.append(f"tx {_rate(tx)}")
    if rx:
        parts.append(f"rx {_rate(rx)}")
    transactions = sum(s.get("transactions") or 0 for s in summaries)
    if transactions:
        parts.append(f" {transactions} transactions ({sum(s.get('tps') or 0.0 for s in summaries):.0f}/s)")
    return " ".join(parts)


def main(args: argparse.Namespace) -> int:
    summaries: list[dict[str, Any]] = []

    def out(event: dict[str, Any]) -> None:
        if event.get("event") in ("done", "error") and isinstance(event.get("summary"), dict):
            summaries.append(event["summary"])
        if args.json:
            import json

            print(json.dumps(event, default=str), flush=True)
            return
        text = format_event(event)
        if text:
            print(text, flush=True)

    if args.role == "server":
        from netesto.engine.serve.server import serve

        return serve(args.bind, args.port, args.datadir, tokens=args.token,
                     token_file=args.token_file, workers=args.workers,
                     handshake_timeout=args.handshake_timeout, emit=out)
    from netesto.engine.serve.workers import load_specs, run_client

    if (args.specs is None) == (args.host is None):
        raise UsageError("give the flows with --specs FILE or -H HOST, not both or neither")
    specs = load_specs(args.specs) if args.specs else command_line_specs(args)
    code = run_client(specs, args.datadir, workers=args.workers, out=out)
    total = total_line(summaries)
    if total and not args.json:
        print(total)
    if code:
        print("some flows failed", file=sys.stderr)
    if not args.json:
        dirs = sorted({str(Path(args.datadir) / str(s.exp) / "flows") for s in specs})
        print(f"raw data in {', '.join(dirs)}")
    return code
