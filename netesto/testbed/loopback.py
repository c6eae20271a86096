"""The fallback lab without root or namespaces: agents on 127.0.0.1, no shaping.

Each host ``hI`` is an agent on 127.0.0.1 with its own port (and CURVE keys,
like a real lab). What is missing is said once, clearly, in the result's
notes: no bottleneck (flows run at memory speed), no delay, no loss, no
per-host congestion-control defaults, every "host" shares one network stack.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any, Callable

from netesto.errors import TestbedError
from netesto.labfile import LabFile, LabHost, write_lab
from netesto.testbed import agents
from netesto.testbed.config import TestbedConfig, UpResult
from netesto.testbed.state import list_states, machine_lock, proc_alive, remove_lab_files, save_state, state_path, stop_process

BASE_PORT = 12870


def _free_ports(n: int, start: int, taken: set[int]) -> list[int]:
    """``n`` ports from ``start`` that nothing listens on and no testbed that is up has given its agents
    (theirs may not listen yet: another ``up`` between its pick and its agents' start)."""
    ports: list[int] = []
    port = start
    while len(ports) < n and port < 65000:
        if port not in taken:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                    ports.append(port)
                except OSError:
                    pass
        port += 1
    if len(ports) < n:
        raise TestbedError(f"no {n} free TCP ports on 127.0.0.1 from {start}")
    return ports


def missing_note(reason: str) -> str:
    return (
        f"loopback lab: {reason}. Agents run on 127.0.0.1 with distinct ports. MISSING: no bottleneck "
        "(no rate limit, no queue), no delay, no loss, no separate network stacks per host; results "
        "show loopback speed, not a network. Run as root on Linux for the namespace testbed."
    )


def up(config: TestbedConfig, *, reason: str, progress: Callable[[str], None]) -> UpResult:
    path = state_path(config.name)
    base = Path(config.dir)
    base.mkdir(parents=True, exist_ok=True)
    note = missing_note(reason)  # shown once, with the other notes the caller prints
    with machine_lock():
        if path.exists():
            raise TestbedError(f"testbed {config.name!r} is up already (state {path})")
        names = [f"h{i}" for i in range(1, config.hosts + 1)]
        taken = {int(h["port"]) for st in list_states() for h in st.get("hosts", []) if "port" in h}
        ports = _free_ports(len(names), BASE_PORT + 100 + (sum(map(ord, config.name)) % 500) * 4, taken)
        state: dict[str, Any] = {
            "name": config.name,
            "mode": "loopback",
            "status": "creating",
            "config": {k: getattr(config, k) for k in ("hosts", "dir")},
            "hosts": [{"name": n, "port": p} for n, p in zip(names, ports)],
            "processes": [],
            "notes": [note],
            "delay_mode": "none",
            "created": time.time(),
        }
        save_state(path, state)
    try:
        lab_hosts = []
        controller_key = ""
        if config.agents and agents.agent_available():
            lab_keys = agents.create_lab_keys(base, config.name, names)

            def record(started: agents.Started) -> None:
                state["processes"].append(started.to_dict())
                save_state(path, state)

            agents.start_agents(base, lab_keys, [agents.AgentPlace(n, None, "127.0.0.1", p) for n, p in zip(names, ports)], record)
            controller_key = lab_keys.controller_key
            public = {n: lab_keys.public_key(n) for n in names}
        else:
            state["notes"].append(f"agents: not started (the agent, {agents.AGENT_MODULE}, is not installed or --no-agents)")
            public = {n: "" for n in names}
        for name, port in zip(names, ports):
            lab_hosts.append(LabHost(name, "127.0.0.1", port, "127.0.0.1", public[name]))
        lab_path = base / f"{config.name}.lab.toml"
        write_lab(lab_path, LabFile(config.name, controller_key, False, "", tuple(lab_hosts), (note,),
                                    testbed={"name": config.name, "mode": "loopback"}))  # no bottleneck
        state["lab"] = str(lab_path)
        state["status"] = "up"
        save_state(path, state)
    except BaseException:
        down(state, path)
        raise
    return UpResult(config.name, Path(state["lab"]), "loopback", "none", state["notes"], state)


def down(state: dict[str, Any], path: Path) -> list[str]:
    problems = []
    for proc in reversed(state.get("processes", [])):
        stop_process(proc["pid"], proc.get("start_time"))
        if proc_alive(proc["pid"], proc.get("start_time")):
            problems.append(f"{proc['kind']} {proc['name']} (pid {proc['pid']}) did not stop")
    remove_lab_files(state)
    path.unlink(missing_ok=True)
    return problems


__all__ = ["down", "missing_note", "up"]
