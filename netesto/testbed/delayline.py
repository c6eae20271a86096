"""A userspace delay line: holds NFQUEUE'd packets for a delay, then accepts them, never early.

This kernel has no netem, so the testbed's router namespace sends forwarded
packets to netfilter queues (``iptables -A FORWARD -o r-h1 -j NFQUEUE
--queue-num 1``) and this process holds each packet for ``delay`` (+ uniform
``jitter``) milliseconds from its own arrival (the kernel's stamp) before the
``NF_ACCEPT`` verdict, or with probability ``loss`` drops it at once. The
pieces: :mod:`~netesto.testbed.nfqueue` (the protocol),
:mod:`~netesto.testbed.delayclock` (stamps onto the loop's clock),
:mod:`~netesto.testbed.delayloop` (the loop), :mod:`~netesto.testbed.delaystats`
(what each packet got), :mod:`~netesto.testbed.delaycontrol` (its control
socket's client, the router agent's SET_NETEM fallback, the bottleneck guard).
This module is the process: its priority, signals, statistics on exit.

Run inside the router namespace::

    python -m netesto.testbed.delayline --queue 1 --queue 2 --delay 10 [--jitter 1] [--loss 0.01]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from netesto.errors import TestbedError
from netesto.testbed.delaycontrol import delayline_stats, guard_links, netem_fallback, netem_show, send_control
from netesto.testbed.delayloop import DelayLine, Link, LinkSettings, SpinBudget
from netesto.testbed.nfqueue import NfQueue

PR_SET_TIMERSLACK = 29


def _tight_timers() -> None:
    """Ask for 1 ns timer slack (default 50 us): a late wake-up is added delay."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _schedule(rt_priority: int, nice: int) -> str:
    """Real-time priority if asked and allowed (children go back to normal), else ``nice``; what it got.

    SCHED_FIFO wakes the loop ahead of every ordinary process, busy loops
    included (a woken nice -10 task can wait for a busy one's slice to end:
    milliseconds), and select() gives it no timer slack. It runs only when a
    packet or a release is due, so it takes the CPU only for the work itself;
    past what one core can forward, the kernel's real-time throttling (95 %
    of each second by default) leaves ordinary processes the rest.
    """
    if rt_priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(rt_priority))
            return f"SCHED_FIFO {rt_priority}"
        except (OSError, AttributeError) as exc:
            print(f"delayline: no real-time priority ({exc}); nice {nice} instead", flush=True)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        return "default priority"  # not root
    return f"nice {nice}"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m netesto.testbed.delayline", description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, action="append", default=[],
                        help="netfilter queue number (repeatable; none = only --guard)")
    parser.add_argument("--delay", type=float, default=0.0, help="one-way delay in ms for every queue")
    parser.add_argument("--jitter", type=float, default=0.0, help="uniform +- jitter in ms")
    parser.add_argument("--loss", type=float, default=0.0, help="drop probability in [0, 1]")
    parser.add_argument("--ordered", action="store_true",
                        help="never let a packet overtake the one queued before it (netem with a rate)")
    parser.add_argument("--control", help="unix datagram socket path for live changes and statistics")
    parser.add_argument("--stats-file", help="the final statistics are written here (JSON) on exit")
    parser.add_argument("--ready-file", help="touched once the queues are bound")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--rt-priority", type=int, default=10,
                        help="SCHED_FIFO priority of the packet loop (default 10; 0 = none, use --nice)")
    parser.add_argument("--spin-us", type=float, default=200.0,
                        help="busy-wait the last this many us before a release instead of sleeping (0 = never)")
    parser.add_argument("--spin-share", type=float, default=0.1,
                        help="busy-waiting takes at most this share of a CPU (default 0.1)")
    parser.add_argument("--nice", type=int, default=-10,
                        help="niceness without real-time priority (default -10)")
    parser.add_argument("--guard", action="append", default=[], metavar="DEV=BW:BYTES:SUBNET",
                        help="re-install the htb bottleneck on DEV whenever its root qdisc is removed")
    parser.add_argument("--state", help="testbed state file: --guard takes the current rate and buffer from it")
    return parser.parse_args(argv)


def _final_stats(line: DelayLine, path: str | None) -> None:
    text = json.dumps(line.snapshot(), sort_keys=True)
    print(f"delayline: final statistics {text}", flush=True)
    if path:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(text + "\n")
        tmp.replace(path)


def _start_guard(args: argparse.Namespace, stop: threading.Event) -> threading.Thread | None:
    if not args.guard:
        return None
    guards = {}
    for text in args.guard:
        dev, _, rest = text.partition("=")
        bw, buffer_bytes, subnet = rest.split(":")
        guards[dev] = (int(bw), int(buffer_bytes), subnet)
    thread = threading.Thread(target=guard_links, args=(guards, stop, 1.0, args.state), daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    stop = threading.Event()
    if not args.queue:
        # Only the guard: a process of its own (the testbed's), so its tc calls never hold up a loop.
        signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
        signal.signal(signal.SIGINT, lambda _s, _f: stop.set())
        _start_guard(args, stop)
        if args.ready_file:
            Path(args.ready_file).write_text(str(os.getpid()))
        while not stop.wait(0.2):
            pass
        return 0
    sched = _schedule(args.rt_priority, args.nice)
    _tight_timers()
    try:
        link = LinkSettings(args.delay, args.jitter, args.loss, args.ordered)
        nfq = NfQueue(args.queue)
        spin = SpinBudget(int(args.spin_us * 1000), args.spin_share)
        line = DelayLine(nfq, {q: link for q in args.queue}, control=args.control, seed=args.seed, spin=spin)
    except (TestbedError, OSError) as exc:
        print(f"delayline: error: {exc}", file=sys.stderr)
        return 1

    def _stop(_sig: int, _frame: object) -> None:
        line.running = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.set_wakeup_fd(line.wake_w.fileno(), warn_on_full_buffer=False)
    if args.guard:
        sys.setswitchinterval(0.0002)  # a release must not wait out the guard thread's 5 ms slice
    _start_guard(args, stop)
    stamps = "kernel stamps" if nfq.stamper is not None else "NO kernel stamps (held from when read)"
    print(f"delayline: queues {args.queue}, {link}, {sched}, {stamps}", flush=True)
    if args.ready_file:
        Path(args.ready_file).write_text(str(os.getpid()))
    try:
        line.run()
        _final_stats(line, args.stats_file)
    finally:
        stop.set()
        line.close()
    return 0


__all__ = ["DelayLine", "Link", "LinkSettings", "delayline_stats", "main", "netem_fallback", "netem_show",
           "send_control"]

if __name__ == "__main__":
    sys.exit(main())
