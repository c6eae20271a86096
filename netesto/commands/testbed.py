"""`netesto testbed up|down|status`: a lab of network namespaces on this machine."""

from __future__ import annotations

import argparse
import json

from netesto.errors import TestbedError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="up|down|status")
    up_help = "create the namespaces, bottleneck and agents; write the lab file"
    up = sub.add_parser("up", help=up_help, description=up_help + " (its path is printed; `netesto run --lab` takes it)")
    up.add_argument("--name", default="tb", help="testbed name, prefixes everything (default tb)")
    up.add_argument("--hosts", type=int, default=3, help="number of hosts h1..hN (default 3)")
    up.add_argument("--bw", default="100mbit", help="bottleneck rate toward each host (default 100mbit)")
    up.add_argument("--rtt", default="20ms", help="round-trip time between hosts (default 20ms)")
    up.add_argument("--host-rtt", metavar="HOST:RTT", default="",
                    help="hosts whose paths have an RTT of their own, e.g. h3:40ms or h2:20ms+h3:60ms: the RTT "
                         "between such a host and one without is its own (at least half --rtt)")
    up.add_argument("--buffer", default="1bdp", help="bottleneck queue: 1bdp, 0.5bdp or bytes (256k, 1M)")
    up.add_argument("--loss", default="0", help="loss in percent, each direction (e.g. 1 or 0.5%%)")
    up.add_argument("--jitter", default="0", help="round-trip jitter, e.g. 2ms (default 0)")
    up.add_argument("--ca", default="cubic", help="default congestion control inside the hosts")
    up.add_argument("--dir", help="where the lab file, keys, logs and agent data go (default ~/.netesto/testbeds)")
    up.add_argument("--no-agents", action="store_true", help="do not start agents (network only)")
    up.add_argument("--loopback", action="store_true", help="agents on 127.0.0.1 only: no namespaces, no shaping")
    down = sub.add_parser("down", help="remove everything a testbed created",
                          description="remove everything a testbed created: namespaces, qdiscs, agents, its lab "
                                      "file and keys. Without --name, the only testbed up, if it is yours and no "
                                      "other owner has one up.")
    down.add_argument("--name", default=None,
                      help="testbed name (default: the only one up, if it is yours and no one else has one up)")
    down.add_argument("--all", action="store_true", help="take every testbed down")
    status_help = "testbeds, owners, hosts, addresses, shaping, processes"
    status = sub.add_parser("status", help=status_help, description=status_help)
    status.add_argument("--name", default=None, help="only this testbed (default: every one up)")
    status.add_argument("--json", action="store_true", help="the raw state as JSON")


def main(args: argparse.Namespace) -> int:
    from netesto.testbed import lifecycle
    from netesto.testbed.config import TestbedConfig

    if args.action == "up":
        cfg = TestbedConfig.parse(
            name=args.name, hosts=args.hosts, bw=args.bw, rtt=args.rtt, buffer=args.buffer,
            loss=args.loss, jitter=args.jitter, ca=args.ca, dir=args.dir, agents=not args.no_agents, loopback=args.loopback,
            host_rtt=args.host_rtt,
        )
        result = lifecycle.up(cfg, progress=lambda msg: print(f"  {msg}", flush=True))
        print(f"testbed {result.name} is up ({result.mode})")
        for note in result.notes:
            print(f"  note: {note}")
        print(f"lab file: {result.lab}")
        print(f"try: netesto run --lab {result.lab} SCRIPT   |   netesto testbed down --name {result.name}")
        return 0
    if args.action == "down":
        names = _names(lifecycle, args.name, every=args.all)
        status = 0
        for name in names:
            problems = lifecycle.down(name)
            if problems:
                status = 1
                print(f"testbed {name}: down, with problems:")
                for p in problems:
                    print(f"  {p}")
            else:
                print(f"testbed {name}: down")
        return status
    states = lifecycle.status(args.name)
    if args.json:
        print(json.dumps(states, indent=1, sort_keys=True))
        return 0
    if not states:
        print("no testbeds are up")
        return 0
    for st in states:
        print(format_status(st))
    return 0


def _names(lifecycle: object, name: str | None, *, every: bool) -> list[str]:
    """The testbeds ``down`` takes: ``name``, every one, or the only one up, which must be this
    owner's (on a shared machine "the only one up" was another user's)."""
    from netesto.testbed.state import list_states, owned_by_me, owner_text

    if name:
        return [name]
    states = list_states()
    if every:
        return [s["name"] for s in states]
    mine = [s["name"] for s in states if owned_by_me(s)]
    others = [f"{s['name']} of {owner_text(s)}" for s in states if not owned_by_me(s)]
    if others:
        yours = f"; yours: {', '.join(mine)}" if mine else "; none is yours"
        raise TestbedError(f"testbeds of other owners are up: {', '.join(others)}{yours}. "
                           "Say which to take down with --name")
    if len(mine) == 1:
        return mine
    if not mine:
        raise TestbedError("no testbeds are up")
    raise TestbedError(f"several testbeds are up ({', '.join(mine)}): say which with --name, or --all")


def format_status(st: dict) -> str:
    """A human summary of one testbed's state."""
    from netesto.testbed.state import owner_text

    cfg = st.get("config", {})
    lines = [f"testbed {st['name']} [{st.get('mode')}, {st.get('status')}] lab {st.get('lab', '-')}",
             f"  owner {owner_text(st)}"]
    if st.get("mode") == "netns":
        lines.append(
            f"  bottleneck {cfg.get('bw_bps', 0) / 1e6:g} Mbit/s, rtt {cfg.get('rtt_ms')} ms, "
            f"buffer {cfg.get('buffer_bytes')} B, loss {cfg.get('loss', 0) * 100:g} %, jitter {cfg.get('jitter_ms', 0):g} ms, "
            f"ca {cfg.get('ca', '?')}, delay by {st.get('delay_mode', '?')}"
        )
        lines.append(f"  router {st.get('router_ns')} control {st.get('router_control_addr')} (controller side {st.get('control_addr')})")
        from netesto.testbed.config import saved_one_way

        own = {str(h): ms for h, ms in cfg.get("host_rtt", []) or []}
        for lk in st.get("links", []):
            rtt = f", own rtt {own[lk['host']]:g} ms" if lk["host"] in own else ""
            lines.append(f"  {lk['host']:<6} ns {lk['ns']:<14} {lk['addr']:<15} via {lk['router_dev']} (queue {lk['queue']}, "
                         f"delay toward it {saved_one_way(cfg, lk['host']):g} ms{rtt})")
    else:
        for host in st.get("hosts", []):
            lines.append(f"  {host['name']:<6} 127.0.0.1:{host['port']}")
    for note in st.get("notes", []):
        lines.append(f"  note: {note}")
    for proc in st.get("processes", []):
        alive = "alive" if proc.get("alive") else "DEAD"
        lines.append(f"  {proc['kind']:<9} {proc['name']:<8} pid {proc['pid']:<7} {alive}  log {proc.get('log')}")
    return "\n".join(lines)
