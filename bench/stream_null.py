"""The stream bench's statistics judged against a null: the engine against copies of itself.

``nice -n 10 python3 -m bench.stream_null [--dur 4] [--reps 6] [--cpus 0,1] [--busy N]`` (root, repository root).

4 bbr flows on one client worker, as ``bench_stream``'s "4 flows bbr" case
runs them, four times per repetition: one run plays the engine, three play
the peers (interleaved, taking turns going first). Every tool is the same,
so a fair statistic reads 1.0 give or take the machine's noise, and one
that does not is biased. Printed, each as the median of the per-rep
ratios [min-max]:

- against the best copy afresh in each rep (and the fewest retransmissions
  per GB of a copy in each rep): the extreme of three noisy readings;
- against the copy with the best median over the reps
  (``common.leading``), as ``bench_stream`` chooses its best peer;
- against one fixed copy.

No target: this judges the bench, not the engine.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_stream import engine_stream
from bench.common import Engine, arguments, busy_note, each_rep_extreme, leading, place, rotated, table, verdict, where
from tests import netns
from tests.testbed.delayrun import busy_loops

COPIES = ("copy 1", "copy 2", "copy 3")


def main() -> int:
    parser = arguments(__doc__, 4.0)
    parser.set_defaults(reps=6)
    args = parser.parse_args()
    cpus = args.cpus
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="stream_null"))
    busy = contextlib.ExitStack()
    busy.enter_context(busy_loops(args.busy))
    try:
        engine = Engine(pair, workdir, server_prefix=place(cpus[1]))
        time.sleep(0.3)
        print(f"# the engine against 3 copies of itself: 4 bbr flows on one worker, {args.dur:g} s runs, {args.reps} "
              f"interleaved reps, veth pair, {where(cpus)}; shared noisy 2-vCPU machine")
        print(busy_note(args.busy))
        rate: dict[str, list[float]] = {name: [] for name in ("engine", *COPIES)}  # bit/s, per rep
        retrans: dict[str, list[float]] = {name: [] for name in rate}  # segments per GB, per rep
        for rep in range(args.reps):
            for name in rotated(list(rate), rep):
                got, _, again = engine_stream(engine, args.dur, "bbr", 4, cpus)
                rate[name].append(got)
                retrans[name].append(again)
        table("4 flows bbr, engine against copies of itself  [Gbit/s]",
              {name: [x / 1e9 for x in vals] for name, vals in rate.items()}, ".2f")
        table("retransmitted segments per GB", retrans, ".0f")
        copies = {c: rate[c] for c in COPIES}
        copies_retrans = {c: retrans[c] for c in COPIES}
        print()
        verdict("goodput / best copy of each rep", rate["engine"], each_rep_extreme(copies), None, None)
        verdict("goodput / copy with the best median", rate["engine"], rate[leading(copies)], None, None)
        verdict("goodput / copy 1", rate["engine"], rate["copy 1"], None, None)
        verdict("retransmissions / fewest of a copy in each rep", retrans["engine"],
                each_rep_extreme(copies_retrans, higher=False), None, None)
        verdict("retransmissions / copy with the fewest (median)", retrans["engine"],
                retrans[leading(copies_retrans, higher=False)], None, None)
        engine.close()
    finally:
        busy.close()
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
