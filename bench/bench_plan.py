"""Benchmark: plan a 10,000-action script (target: under 0.5 s).

Runs the interpreter on FOR loops of DO_CLIENT inside a macro (the shape of
inlib's MServerRR) and prints actions/s. There is no peer tool that plans
Netesto scripts (the original needs Python 2 and live hosts), so the ratio
printed is against the target. The machine is shared: numbers are noisy.
"""

from __future__ import annotations

import time

from netesto.script import Interpreter, MemoryCounter, MemoryLoader

TARGET_ACTIONS = 10_000
TARGET_SECONDS = 0.5

SCRIPT = """
SET randDelay=0.1
BEGIN Many
SET exp=COUNTER
FOR s IN $servers DO
  DO_SERVER exp=$exp host=$s order=0 expName=$expName start=1
  SET exp=PREV
DONE
FOR c IN $clients DO
  FOR s IN $servers DO
    FOR r IN $reqs DO
      DO_CLIENT host=$c server=$s ca=$ca dur=$dur delay=0 test=TCP_RR \\
         instances=$instances req=$r reply=$reply stats=1
    DONE
  DONE
DONE
WAIT $dur
FOR s IN $servers DO
  DO_SERVER host=$s order=1
  GET_DATA host=$s
DONE
PROCESS_EXP
END Many
HOST_SUFFIX lab.example
FOR round IN 1..$rounds DO
  RUN Many servers=s1,s2,s3,s4 clients=c1,c2,c3,c4,c5 reqs=1K,10K,100K,1M,S \\
      ca=cubic,bbr dur=10 instances=2 reply=1 expName=bench
DONE
"""


def per_round() -> int:
    # 4 servers + 5*4*5 clients + 1 wait + 4*2 + 1 process, per ca value (2).
    return 2 * (4 + 100 + 1 + 8 + 1)


def run_once(rounds: int) -> tuple[int, float]:
    interp = Interpreter(loader=MemoryLoader(), counter=MemoryCounter(),
                         defines={"rounds": str(rounds)})
    start = time.perf_counter()
    count = sum(1 for _ in interp.run_text(SCRIPT, file="bench"))
    return count, time.perf_counter() - start


def main() -> None:
    rounds = -(-TARGET_ACTIONS // per_round())
    run_once(2)  # warm up imports and caches
    best = None
    for _ in range(5):
        count, secs = run_once(rounds)
        best = secs if best is None or secs < best else best
    assert best is not None
    rate = count / best
    print(f"planned {count} actions in {best:.3f} s (best of 5): {rate:,.0f} actions/s")
    print(f"target: {TARGET_ACTIONS} actions in < {TARGET_SECONDS} s -> "
          f"{'MET' if count / rate < TARGET_SECONDS * count / TARGET_ACTIONS else 'MISSED'} "
          f"(time for 10,000 actions: {TARGET_ACTIONS / rate:.3f} s, "
          f"{TARGET_SECONDS / (TARGET_ACTIONS / rate):.1f}x faster than the target)")
    print("note: shared 2-core machine; numbers are noisy")


if __name__ == "__main__":
    main()
