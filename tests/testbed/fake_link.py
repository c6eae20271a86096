"""A stand-in link backend for NETESTO_LINK_BACKEND: keeps the link's shape in a JSON file, logs every call."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

BASE = {"rate": 100e6, "buffer": 250e3, "delay": 10.0, "jitter": 0.0, "loss": 0.0}


class FakeLink:
    """The shape of ``dev`` lives in ``$FAKE_LINK_DIR/<dev>.json``; each call is a line of ``calls.log``."""

    def __init__(self, dev: str) -> None:
        self.dir = Path(os.environ["FAKE_LINK_DIR"])
        self.shape_file = self.dir / f"{dev}.json"
        if not self.shape_file.exists():
            self._write(BASE)

    def _write(self, shape: dict[str, float]) -> None:
        tmp = self.shape_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(shape))
        os.replace(tmp, self.shape_file)  # the test reads it meanwhile

    def _log(self, *call: Any) -> None:
        with open(self.dir / "calls.log", "a") as f:
            f.write(json.dumps([time.time(), *call]) + "\n")

    def read(self) -> dict[str, float]:
        return dict(json.loads(self.shape_file.read_text()))

    def prepare(self, params: list[str]) -> None:
        pass

    def apply(self, param: str, value: float) -> None:
        shape = self.read()
        shape[param] = value
        self._write(shape)
        self._log("apply", param, value)

    def readback(self, param: str) -> float | None:
        return self.read().get(param)

    def trace(self, path: str | None, name: str, epoch_ns: int, limit_bytes: int, limit_packets: int) -> dict:
        self._log("trace", path, name, limit_bytes, limit_packets)
        return {"trace": name}

    def restore(self, base: dict[str, float]) -> list[str]:
        self._write(base)
        self._log("restore", base)
        return []

    def close(self) -> None:
        pass


def backend(dev: str) -> FakeLink:
    return FakeLink(dev)
