"""What a change to the engine is worth: this checkout against another, interleaved (an A/B).

``nice -n 10 python3 -m bench.ab BASE [--flow JSON] [--pairs 10] [--dur 3] [--cpus 0,1] [--busy N]``
(root, repository root).

BASE is a git revision of this repository (``HEAD~1``, a branch, a commit),
checked out into a temporary worktree whose C loops are built there
(``setup.py build_ext --inplace``, a few seconds) and which is removed after,
or the directory of another checkout, run as it is. Both variants run the same
flow: ``--flow`` (a JSON object of flow fields) over the default one TCP_CRR
flow closing server-first. Each pair of runs is this tree's flow and BASE's,
in an order that turns every pair, each on a fresh veth pair (no TIME_WAIT
sockets or server state left by the other), with both ends of a variant
running that variant's code (``PYTHONPATH`` at its tree, checked before the
first run). The client runs on the client CPU and the server on the server
CPU, each in a session of its own, as the peer benches place them.

Reading: transactions/s for the RR tests, delivered bits/s otherwise (the
receiver's count). Printed: every pair's readings, then this / BASE as the
median of the per-pair ratios with its [min-max] spread, how many pairs
were above 1, and the two-sided sign test's p for "neither is ahead". On
these shared 2-core guests a host's drift moves one tool by 5-10 % between
minutes, so a change of a few percent needs tens of pairs, not a handful.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from bench.common import Engine, busy_note, guard, place, placement, rotated, where
from tests import netns
from tests.testbed.delayrun import busy_loops

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FLOW: dict[str, Any] = {"test": "TCP_CRR", "crr_close": "server", "ca": ""}
FLOW_ID = "a-b-0-0"


def sign_test(above: int, below: int) -> float:
    """Two-sided p of an exact sign test: as many or more pairs on one side if each side were as likely."""
    n = above + below
    if n == 0:
        return 1.0
    k = min(above, below)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def reading(eng: Engine, flow: dict[str, Any], prefix: list[str]) -> float:
    """One run of ``flow``: transactions/s (RR tests) or the receiver's bits/s."""
    cli = eng.run([flow], workers=1, client_prefix=prefix)[0]
    test = flow["test"]
    if test.endswith("RR"):
        return float(cli["tps"])
    if test in ("TCP_MAERTS", "TCP_BIDIR"):
        return float(cli["rate_rx_bps"])
    return float(eng.server_summaries([FLOW_ID])[0]["rate_rx_bps"])


def run_in(tree: Path) -> list[str]:
    """The prefix that runs the engine from ``tree``'s code."""
    return ["env", f"PYTHONPATH={tree}"]


def check_tree(tree: Path) -> str:
    """Which C loops ``tree``'s engine has ("C" or "python"), after checking that it runs from ``tree``."""
    code = ("import netesto, netesto.engine.native.crrfast as c; "
            "print(netesto.__file__); print(c.PATH)")
    out = subprocess.run([*run_in(tree), sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2:
        raise SystemExit(f"bench.ab: the engine of {tree} does not import: {out.stderr.strip()[-300:]}")
    if not Path(lines[0]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"bench.ab: with PYTHONPATH={tree}, netesto comes from {lines[0]}")
    return lines[1]


@contextlib.contextmanager
def base_tree(base: str) -> Iterator[Path]:
    """BASE as a directory: itself, or a revision checked out into a temporary worktree and built."""
    path = Path(base)
    if path.is_dir() and (path / "netesto").is_dir():
        yield path.resolve()
        return
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        raise SystemExit(f"bench.ab: {base!r} is neither a checkout's directory nor a revision of {REPO}")
    work = Path(tempfile.mkdtemp(prefix="netesto-ab-"))
    tree = work / "tree"
    try:
        add = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--quiet", "--detach", str(tree),
                              rev.stdout.strip()], capture_output=True, text=True)
        if add.returncode != 0:
            raise SystemExit(f"bench.ab: cannot check {base} out into {tree}: {add.stderr.strip()[-300:]}")
        build = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                               capture_output=True, text=True)
        if build.returncode != 0:
            print(f"# {base}: its C loops did not build; it runs the Python twins\n{build.stderr[-500:]}")
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def one_run(tree: Path, flow: dict[str, Any], cpus: tuple[int | None, int | None], workdir: Path) -> float:
    pair = netns.make_veth_pair()
    try:
        eng = Engine(pair, workdir / pair.a, server_prefix=place(cpus[1]) + run_in(tree))
        try:
            return reading(eng, flow, place(cpus[0]) + run_in(tree))
        finally:
            eng.close()
    finally:
        pair.close()


def report(ours: list[float], theirs: list[float], base: str) -> None:
    """Print the verdict line: this / BASE over the pairs."""
    ratios = [a / b for a, b in zip(ours, theirs) if b > 0]
    if not ratios:
        print("  no pair gave BASE a reading above 0")
        return
    above = sum(r > 1 for r in ratios)
    below = sum(r < 1 for r in ratios)
    med = statistics.median(ratios)
    print(f"  this / {base}: median {med:.3f} [{min(ratios):.2f}-{max(ratios):.2f}] of {len(ratios)} pairs, "
          f"{above} above 1, {below} below; sign test p = {sign_test(above, below):.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", help="a git revision of this repository, or another checkout's directory")
    parser.add_argument("--flow", type=json.loads, default={},
                        help='flow fields over the default TCP_CRR server-first flow, e.g. \'{"test": "TCP_RR"}\'')
    parser.add_argument("--pairs", type=int, default=10, help="interleaved pairs of runs (default 10)")
    parser.add_argument("--dur", type=float, default=3.0, help="seconds per run (default 3)")
    parser.add_argument("--cpus", type=placement, default=(0, 1),
                        help="client CPU,server CPU (default 0,1), or none")
    parser.add_argument("--busy", type=int, default=0, metavar="N", help="N busy loops beside every run")
    args = parser.parse_args(argv)
    if args.pairs < 1 or not isinstance(args.flow, dict):
        parser.error("--pairs must be >= 1 and --flow a JSON object")
    flow = {**DEFAULT_FLOW, "dur": args.dur, **args.flow, "flow_id": FLOW_ID}
    workdir = Path(tempfile.mkdtemp(prefix="netesto-ab-runs-"))
    try:
        with base_tree(args.base) as tree, busy_loops(args.busy):
            trees = {"this": REPO, "base": tree}  # (keyed apart from BASE's name, which could be "this")
            print(f"# A/B: this tree ({REPO}) against {args.base} ({tree}); loops: this {check_tree(REPO)}, "
                  f"{args.base} {check_tree(tree)}")
            print(f"# flow {json.dumps({k: v for k, v in flow.items() if k != 'flow_id'})}, {where(args.cpus)}, "
                  f"a fresh veth pair per run\n{busy_note(args.busy)}")
            rr = flow["test"].endswith("RR")
            unit, scale, fmt = ("transactions/s", 1.0, ".0f") if rr else ("Gbit/s", 1e-9, ".3f")
            got: dict[str, list[float]] = {name: [] for name in trees}
            print(f"  pair {'this':>14} {args.base[:14]:>14}   ({unit})")
            for i in range(args.pairs):
                for name in rotated(list(trees), i):
                    got[name].append(one_run(trees[name], flow, args.cpus, workdir))
                print(f"  {i + 1:>4} {got['this'][-1] * scale:>14{fmt}} {got['base'][-1] * scale:>14{fmt}}",
                      flush=True)
            report(got["this"], got["base"], args.base)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    guard()  # (the process's: stale namespaces go, SIGTERM unwinds, this run's namespaces go at exit)
    sys.exit(main())
