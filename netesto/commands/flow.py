"""``netesto flow server|client``: the built-in flow engine without agents, with readable output."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from netesto.errors import UsageError
from netesto.traffic.__main__ import add_arguments as _engine_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the raw JSON event lines instead of a summary")
    parser.epilog = (
        "example: netesto flow server --datadir /tmp/d &  "
        "netesto flow client --specs flows.json --datadir /tmp/d"
    )


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
        lines.append(f"    cpu {cpu.get('seconds', 0):.2f} s ({cpu.get('percent', 0):.0f} % of a core, "
                     f"{cpu.get('scope', '')}), {summary.get('samples', 0)} samples")
        return "\n".join(lines)
    if kind in ("dropped", "refused"):
        return f"{kind} a connection: {event.get('reason', '')}"
    return None


def main(args: argparse.Namespace) -> int:
    def out(event: dict[str, Any]) -> None:
        if args.json:
            import json

            print(json.dumps(event, default=str), flush=True)
            return
        text = format_event(event)
        if text:
            print(text, flush=True)

    if args.role == "server":
        from netesto.traffic.server import serve

        # The engine would wrap a bad port around (99999 -> 34463) rather than refuse it.
        if not 0 <= args.port <= 65535:
            raise UsageError(f"--port {args.port}: expected 0..65535 (0 = any)")
        if args.workers < 0:
            raise UsageError(f"--workers {args.workers}: expected 0 or more (0 = automatic)")

        return serve(args.bind, args.port, args.datadir, tokens=args.token,
                     token_file=args.token_file, workers=args.workers,
                     handshake_timeout=args.handshake_timeout, emit=out)
    if args.workers is not None and args.workers < 0:
        raise UsageError(f"--workers {args.workers}: expected 0 or more (0 = automatic)")
    from netesto.traffic.engine import load_specs, run_client

    code = run_client(load_specs(args.specs), args.datadir, workers=args.workers, out=out)
    if code:
        print("some flows failed", file=sys.stderr)
    return code
