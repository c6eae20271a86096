"""A lab made ready for a sweep's next point: a dead run's lease waited out, stale agent data fetched.

A sweep killed mid-point leaves its claim on the agents until the lease lapses (30 s
by default) and the point's experiment unfetched on them; an agent restarted
mid-point keeps that experiment's data on disk. Either way the next point, in a
fresh working directory, would draw the same experiment number and be refused
("holds unfetched data of experiment 1"). Before a point, the sweep waits (saying
so) until no other run owns the lab, and fetches what the agents still hold into
the attempt it belongs to (``<attempt>/leftover/<exp>/``), where it is kept and
named but never part of a point's result.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from netesto.errors import AgentError, NetestoError, SweepError

LAB_WAIT = 300.0  # seconds a point waits for another run's claim on its lab to end
HELLO_TIMEOUT = 5.0


def _wait_free(client: object, host: str, lab_path: str, deadline: float, say: Callable[[str], None]) -> None:
    """Claim and release at once (a probe); while another run owns the agent, wait and say so."""
    from netesto.controller.session import controller_name

    said = ""
    while True:
        try:
            client.claim(f"sweep-probe-{os.getpid()}", controller_name())  # type: ignore[attr-defined]
            client.release()  # type: ignore[attr-defined]
            return
        except AgentError as exc:
            if exc.kind != "Busy":
                raise
            if time.monotonic() > deadline:
                raise SweepError(f"lab {lab_path}: {host}: {exc.message}; waited {LAB_WAIT:.0f} s") from None
            owner = str((exc.detail or {}).get("run", "")) if isinstance(exc.detail, dict) else ""
            if owner != said:
                said_host = "" if exc.message.startswith(f"{host}:") else f"{host}: "
                say(f"netesto sweep: {said_host}{exc.message}; waiting for it before the next point")
                said = owner
            left = exc.detail.get("lease_left", 1.0) if isinstance(exc.detail, dict) else 1.0
            time.sleep(min(max(float(left), 0.2) + 0.2, 5.0))


def ready(lab_path: str, say: Callable[[str], None], wait: float = LAB_WAIT) -> list[str]:
    """Wait until no other run owns the lab at ``lab_path``; the hosts that hold unfetched data."""
    from netesto.controller import Lab
    from netesto.controller.session import default_client_factory

    lab = Lab.from_file(lab_path)
    deadline = time.monotonic() + wait
    holding = []
    for host in lab:
        client = default_client_factory(host, lab)
        try:
            client.timeout = HELLO_TIMEOUT
            info = client.hello()
            if "claim" in info.commands:
                _wait_free(client, host.name, lab_path, deadline, say)
                info = client.hello()  # what it holds once the owner is gone (a lapsed lease stops its flows)
            if info.unfetched:
                holding.append(host.name)
        finally:
            client.close()
    return holding


def salvage(lab_path: str, workdir: Path, say: Callable[[str], None]) -> list[Path]:
    """Fetch every experiment the lab's agents hold into ``workdir``; the experiment directories."""
    from netesto.controller import collect

    try:
        result = collect(lab_path, workdir)
    except NetestoError as exc:  # what was fetched stays; the rest stays on the agents
        say(f"netesto sweep: fetching stale data into {workdir}: {exc.format_message()}")
        result = exc.detail
    exps = getattr(result, "exps", []) or []
    return [workdir / str(e) for e in exps if (workdir / str(e)).is_dir()]


def recover(lab_path: str, workdir: Path, say: Callable[[str], None]) -> list[Path]:
    """:func:`ready`, then :func:`salvage` into ``workdir`` if any agent holds data."""
    holding = ready(lab_path, say)
    if not holding:
        return []
    say(f"netesto sweep: {', '.join(holding)} still hold(s) data of an earlier run: fetching it into {workdir}")
    return salvage(lab_path, workdir, say)


__all__ = ["LAB_WAIT", "ready", "recover", "salvage"]
