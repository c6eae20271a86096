"""A stand-in userspace delay line for NETESTO_NETEM_FALLBACK: records its calls in a file."""

from __future__ import annotations

import json
import os


def netem_fallback(dev: str, delay: float, jitter: float, loss: float, rate: int, limit: int) -> dict:
    with open(os.environ["FAKE_DELAYLINE_LOG"], "a") as f:
        f.write(json.dumps([dev, delay, jitter, loss, rate, limit]) + "\n")
    return {"delay_ms": delay}
