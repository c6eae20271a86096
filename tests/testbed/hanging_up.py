"""A test-only `netesto testbed up` that hangs at one step, to be killed there (a crashed `up`).

``python -m tests.testbed.hanging_up NAME DIR STEP``: builds testbed NAME (2 hosts, agents)
in DIR and sleeps for an hour when STEP begins. What it built is in the testbed's state
file, which is all `netesto testbed down` needs.
"""

from __future__ import annotations

import sys
import time

from netesto.testbed import lifecycle
from netesto.testbed.config import TestbedConfig


def main(name: str, where: str, step: str) -> None:
    if step not in lifecycle.STEPS:
        raise SystemExit(f"unknown step {step!r}: one of {', '.join(lifecycle.STEPS)}")

    def hang_at(now: str) -> None:
        if now == step:
            time.sleep(3600)

    lifecycle.up(TestbedConfig.parse(name=name, hosts=2, dir=where), at_step=hang_at)


if __name__ == "__main__":
    main(*sys.argv[1:4])
