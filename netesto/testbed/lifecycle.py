"""Bring a testbed up, tear it down, report its status.

``up`` records every resource in the state file as soon as it exists and
undoes everything if any step fails; ``down`` works from the state file
alone, so it also cleans up after a crashed ``up``. Machine-wide sysctls
(``tcp_allowed_congestion_control``, ``tcp_child_ehash_entries``) are shared
by all testbeds: the first one up saves the old values, the last one down
restores them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

from netesto.errors import TestbedError
from netesto.labfile import LabFile, LabHost, write_lab
from netesto.testbed import agents, buffers, loopback, naming, shaping, topology
from netesto.testbed.config import WANTED_CC, TestbedConfig, UpResult
from netesto.testbed.inplace import host_delay
from netesto.testbed.state import (
    list_states,
    load_state,
    machine_lock,
    proc_alive,
    remove_lab_files,
    save_state,
    state_dir,
    state_path,
    stop_process,
)

EHASH_ENTRIES = "1024"
AGENT_PORT = 12870
# The steps of `up`, in order; ``up(..., at_step=f)`` calls ``f(step)`` as each begins (a
# test makes one fail or hang there).
STEPS = ("globals", "topology", "shaping", "delay", "agents", "lab")
STEPS = ("globals", "topology", "shaping", "delay", "agents", "lab")


def namespaces_supported() -> tuple[bool, str]:
    """Whether we can build a namespace testbed here; if not, why."""
    if os.geteuid() != 0:
        return False, "not running as root (namespaces, tc and iptables need CAP_NET_ADMIN)"
    for tool in ("ip", "tc", "iptables"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` is not installed"
    probe = f"ntbprobe{os.getpid()}"
    proc = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if proc.returncode != 0:
        return False, f"network namespaces are not available: {proc.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return True, ""


class _StateRecorder(topology.Recorder):
    def __init__(self, path: Path, state: dict[str, Any]) -> None:
        self.path = path
        self.state = state

    def save(self) -> None:
        save_state(self.path, self.state)

    def namespace(self, ns: str) -> None:
        self.state["namespaces"].append(ns)
        self.save()

    def root_link(self, dev: str) -> None:
        self.state["root_links"].append(dev)
        self.save()

    def process(self, started: agents.Started) -> None:
        self.state["processes"].append(started.to_dict())
        self.save()

    def iptables(self, ns: str, rule: list[str]) -> None:
        self.state["iptables"].append({"ns": ns, "rule": rule})
        self.save()


def _read_sysctl(key: str) -> str:
    return Path("/proc/sys", *key.split(".")).read_text().strip()


def _write_sysctl(key: str, value: str) -> None:
    Path("/proc/sys", *key.split(".")).write_text(value)


def _acquire_globals(name: str) -> dict[str, str]:
    """Set the machine-wide sysctls for testbeds; remember old values (first user)."""
    path = state_dir() / "_globals.json"
    with machine_lock():
        data = json.loads(path.read_text()) if path.exists() else {"saved": {}, "users": []}
        data["users"] = _live_users(data["users"])
        available = _read_sysctl("net.ipv4.tcp_available_congestion_control").split()
        allowed_now = _read_sysctl("net.ipv4.tcp_allowed_congestion_control").split()
        wanted = {
            "net.ipv4.tcp_allowed_congestion_control": " ".join(
                dict.fromkeys([*allowed_now, *(c for c in WANTED_CC if c in available)])
            ),
            "net.ipv4.tcp_child_ehash_entries": EHASH_ENTRIES,
        }
        if not data["users"]:
            data["saved"] = {k: _read_sysctl(k) for k in wanted}
        if name not in data["users"]:
            data["users"].append(name)
        # Recorded before anything changes, so a failure below is still undone.
        path.write_text(json.dumps(data))
        for key, value in wanted.items():
            try:
                _write_sysctl(key, value)
            except OSError as exc:
                raise TestbedError(f"cannot set {key}={value!r} in the initial namespace: {exc}") from exc
        return wanted


def _live_users(users: list[str]) -> list[str]:
    # A testbed whose state file is gone (removed by hand) holds nothing any more.
    return [u for u in users if state_path(u).exists()]


def _release_globals(name: str) -> list[str]:
    path = state_dir() / "_globals.json"
    errors: list[str] = []
    with machine_lock():
        if not path.exists():
            return errors
        data = json.loads(path.read_text())
        data["users"] = [u for u in _live_users(data["users"]) if u != name]
        if data["users"]:
            path.write_text(json.dumps(data))
            return errors
        for key, value in data["saved"].items():
            try:
                _write_sysctl(key, value)
            except OSError as exc:
                errors.append(f"restoring {key}={value!r}: {exc}")
        path.unlink()
    return errors


def up(config: TestbedConfig, *, progress: Callable[[str], None] | None = None,
       at_step: Callable[[str], None] | None = None, replace: bool = False) -> UpResult:
    """Build the testbed of ``config``; on any failure, undo everything and re-raise.
    ``at_step`` is called with the name of each step of :data:`STEPS` as it begins; with
    ``replace`` a testbed of the same name left up by this owner (a notebook run again after an
    interrupt) is taken down first."""
    say = progress or (lambda _msg: None)
    if replace and naming.take_back(config.name, down):
        say(f"took down the testbed {config.name!r} this owner had left up")
    ok, why = (False, "asked for with --loopback") if config.loopback else namespaces_supported()
    if not ok:
        return loopback.up(config, reason=why, progress=say)
    path = state_path(config.name)
    with machine_lock():
        if path.exists():
            raise TestbedError(f"testbed {config.name!r} is up already (state {path}); `netesto testbed down --name {config.name}` first")
        used = {s.get("subnet") for s in list_states()}
        taken = {u for u in used if isinstance(u, int)} | topology.root_subnets_in_use()
        topo = topology.plan_topology(config.name, config.hosts, taken)
        stale = [ns for ns in topo.namespaces if ns in topology.existing_namespaces()]
        if stale:
            raise TestbedError(f"namespace(s) {', '.join(stale)} exist but no testbed state does: remove them by hand (`ip netns del ...`)")
        state: dict[str, Any] = {
            "name": config.name,
            "mode": "netns",
            "status": "creating",
            "config": asdict(config),
            "subnet": topo.subnet,
            "bw_bps": config.bw_bps,
            "namespaces": [],
            "root_links": [],
            "iptables": [],
            "processes": [],
            "globals": False,
            "links": [],
            "created": time.time(),
        }
        save_state(path, state)
    rec = _StateRecorder(path, state)
    try:
        _build(config, topo, rec, say, at_step or (lambda _step: None))
    except BaseException:
        say("set-up failed: removing what was created")
        with contextlib.suppress(Exception):
            down(config.name)
        raise
    return UpResult(config.name, Path(state["lab"]), "netns", state["delay_mode"], state.get("notes", []), state)


def _build(config: TestbedConfig, topo: topology.Topology, rec: _StateRecorder, say: Callable[[str], None],
           step: Callable[[str], None]) -> None:
    state = rec.state
    base = Path(config.dir)
    base.mkdir(parents=True, exist_ok=True)
    step("globals")
    say("machine-wide sysctls: allowed congestion controls, tcp_child_ehash_entries")
    # Before the namespaces exist: they take their private ehash size at creation.
    state["globals"] = True
    rec.save()
    state["globals_set"] = _acquire_globals(config.name)
    rec.save()

    step("topology")
    say(f"namespaces {topo.router_ns}, {topo.links[0].ns}..{topo.links[-1].ns}; addresses 10.{topo.subnet}.0.0/16")
    state["links"] = [asdict(lk) for lk in topo.links]
    state["router_ns"] = topo.router_ns
    state["control_addr"] = topo.control_addr
    state["router_control_addr"] = topo.router_control_addr
    rec.save()
    topology.build(topo, rec)
    for lk in topo.links:
        topology.sysctl_ns(lk.ns, {"net.ipv4.tcp_congestion_control": config.ca, "net.ipv4.tcp_no_metrics_save": "1"})
        state["socket_buffers"] = buffers.size_buffers(lk.ns, config.bw_bps, config.rtt_ms, config.buffer_bytes)
    say(f"socket buffers: up to {buffers.ceiling(config.bw_bps, config.rtt_ms, config.buffer_bytes)} bytes "
        f"({buffers.HEADROOM} x bandwidth x (RTT + queue)): {state['socket_buffers']}")

    step("shaping")
    say(f"bottleneck: htb {config.bw_bps / 1e6:g} Mbit/s, bfifo {config.buffer_bytes} bytes per router link")
    for lk in topo.links:
        shaping.setup_bottleneck(topo.router_ns, lk.router_dev, config.bw_bps, config.buffer_bytes, topo.control_subnet)

    step("delay")
    one_way = config.rtt_ms / 2
    own = {lk.host: config.one_way_ms(lk.host) for lk in topo.links if lk.host in dict(config.host_rtt)}
    notes = state.setdefault("notes", [])
    guards = [f"{lk.router_dev}={config.bw_bps}:{config.buffer_bytes}:{topo.control_subnet}" for lk in topo.links]
    if shaping.netem_available(topo.router_ns):
        state["delay_mode"] = "netem"
        for lk in topo.links:
            if own.get(lk.host, one_way) or config.loss or config.jitter_ms:
                shaping.setup_netem(lk.ns, lk.dev, own.get(lk.host, one_way), config.jitter_ms / 2, config.loss)
        notes.append(f"delay: netem on each host's egress, {one_way:g} ms one way")
        _start_guard(config, topo, rec, base, guards)
    else:
        state["delay_mode"] = "delayline"
        for lk in topo.links:
            rule = ["FORWARD", "-i", "r-+", "-o", lk.router_dev, "-j", "NFQUEUE", "--queue-num", str(lk.queue)]
            rec.iptables(topo.router_ns, rule)
            topology.ns_exec(topo.router_ns, ["iptables", "-w", "-A", *rule])
        started = _start_delayline(config, topo, rec, base, [lk.queue for lk in topo.links], one_way)
        for lk in topo.links:  # hosts with an RTT of their own: the delay toward them
            if lk.host in own:
                host_delay(state, lk.queue, own[lk.host], config.jitter_ms / 2, config.loss)
        _start_guard(config, topo, rec, base, guards)
        notes.append(
            f"delay: this kernel has no netem; userspace NFQUEUE delay line (pid {started.pid}) holds packets "
            f"{one_way:g} ms each way in {topo.router_ns}"
        )
    rec.save()

    step("agents")
    keys_dir = base / f"{config.name}.keys"
    lab_hosts: list[LabHost] = []
    names = [lk.host for lk in topo.links] + ["router"]
    if config.agents and agents.agent_available():
        say(f"agents: fresh CURVE keys in {keys_dir}, one agent per namespace")
        lab_keys = agents.create_lab_keys(base, config.name, names)
        agent_env = {"NETESTO_TESTBED_STATE": str(rec.path)}
        places = [agents.AgentPlace(lk.host, lk.ns, lk.addr, AGENT_PORT, agent_env) for lk in topo.links]
        places.append(agents.AgentPlace("router", topo.router_ns, topo.router_control_addr, AGENT_PORT,
                                        {"NETESTO_NETEM_FALLBACK": "netesto.testbed.delayline:netem_fallback",
                                         "NETESTO_LINK_BACKEND": "netesto.testbed.linkctl:backend", **agent_env}))
        agents.start_agents(base, lab_keys, places, rec.process)
        controller_key = lab_keys.controller_key
        public = {n: lab_keys.public_key(n) for n in names}
    else:
        why = "--no-agents" if not config.agents else f"the agent ({agents.AGENT_MODULE}) is not installed"
        notes.append(f"agents: not started ({why}); the lab file lists where they would listen")
        controller_key = ""
        public = {n: "" for n in names}
    rec.save()

    step("lab")
    for lk in topo.links:
        lab_hosts.append(LabHost(lk.host, lk.addr, AGENT_PORT, lk.addr, public[lk.host], shape_agent="router", shape_dev=lk.router_dev, dev=lk.dev))
    lab_hosts.append(LabHost("router", topo.router_control_addr, AGENT_PORT, public_key=public["router"], role="router"))
    lab_path = base / f"{config.name}.lab.toml"
    comment = (
        f"testbed {config.name}: {config.hosts} hosts, {config.bw_bps / 1e6:g} Mbit/s, rtt {config.rtt_ms:g} ms, "
        f"buffer {config.buffer_bytes} B, loss {config.loss * 100:g} %, delay by {state['delay_mode']}"
    )
    shape = {"name": config.name, "mode": "netns", "bw": config.bw_bps, "rtt": config.rtt_ms,
             "buffer": config.buffer_bytes, "loss": config.loss, "jitter": config.jitter_ms,
             **({"host_rtt": dict(config.host_rtt)} if config.host_rtt else {})}
    write_lab(lab_path, LabFile(config.name, controller_key, False, "", tuple(lab_hosts), (comment,), testbed=shape))
    state["lab"] = str(lab_path)
    state["status"] = "up"
    rec.save()


def _start_delayline(config: TestbedConfig, topo: topology.Topology, rec: _StateRecorder, base: Path,
                     queues: list[int], one_way: float) -> agents.Started:
    control = state_dir() / f"{config.name}.delayline.sock"
    ready = state_dir() / f"{config.name}.delayline.ready"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "netesto.testbed.delayline", "--delay", f"{one_way}", "--jitter", f"{config.jitter_ms / 2}",
            "--loss", f"{config.loss}", "--control", str(control), "--ready-file", str(ready),
            "--stats-file", str(base / f"{config.name}.logs" / "delayline.stats.json")]
    for q in queues:
        argv += ["--queue", str(q)]
    started = agents.spawn("delayline", "delayline", topo.router_ns, argv, base / f"{config.name}.logs" / "delayline.log")
    rec.process(started)
    agents.wait_file(ready, started)
    ready.unlink(missing_ok=True)
    rec.state["delayline_control"] = str(control)
    return started


def _start_guard(config: TestbedConfig, topo: topology.Topology, rec: _StateRecorder, base: Path, guards: list[str]) -> None:
    """A separate process keeps the bottleneck on the router links (its tc calls
    would otherwise cost the delay line's packet loop the GIL)."""
    ready = state_dir() / f"{config.name}.guard.ready"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "netesto.testbed.delayline", "--ready-file", str(ready), "--state", str(rec.path)]
    for g in guards:
        argv += ["--guard", g]
    started = agents.spawn("guard", "guard", topo.router_ns, argv, base / f"{config.name}.logs" / "guard.log")
    rec.process(started)
    agents.wait_file(ready, started)
    ready.unlink(missing_ok=True)


def down(name: str) -> list[str]:
    """Remove everything testbed ``name`` created; the problems met (empty = clean)."""
    path = state_path(name)
    state = load_state(path)
    problems: list[str] = []
    if state.get("mode") == "loopback":
        return loopback.down(state, path)
    if os.geteuid() != 0:
        raise TestbedError(f"testbed {name!r} is made of network namespaces: taking it down needs root")
    for proc in reversed(state.get("processes", [])):
        stop_process(proc["pid"], proc.get("start_time"))
        if proc_alive(proc["pid"], proc.get("start_time")):
            problems.append(f"{proc['kind']} {proc['name']} (pid {proc['pid']}) did not stop")
    existing = topology.existing_namespaces()
    for entry in state.get("iptables", []):
        if entry["ns"] in existing:
            topology.ns_exec(entry["ns"], ["iptables", "-w", "-D", *entry["rule"]], check=False)
    for ns in state.get("namespaces", []):
        if ns not in existing:
            continue
        # Whatever still runs inside our own namespaces (flows, ping) goes too.
        for pid_text in topology.run(["ip", "netns", "pids", ns], check=False).stdout.split():
            stop_process(int(pid_text), None, grace=1.0)
        topology.delete_namespace(ns)
        if ns in topology.existing_namespaces():
            problems.append(f"namespace {ns} could not be removed")
    for dev in state.get("root_links", []):
        topology.delete_root_link(dev)
    if state.get("globals"):
        problems += _release_globals(name)
    if state.get("delayline_control"):
        Path(state["delayline_control"]).unlink(missing_ok=True)
    for leftover in state_dir().glob(f"{name}.*.ready"):  # an `up` killed while waiting
        leftover.unlink(missing_ok=True)
    remove_lab_files(state)
    path.unlink(missing_ok=True)
    return problems


@contextlib.contextmanager
def testbed(**kw: Any) -> Iterator[UpResult]:
    """``with testbed(hosts=3, rtt="20ms") as tb: run(script, lab=tb.lab)``; always torn down.

    Keywords are those of :meth:`TestbedConfig.parse`.
    """
    result = up(TestbedConfig.parse(**kw))
    try:
        yield result
    finally:
        down(result.name)


def status(name: str | None = None) -> list[dict[str, Any]]:
    """State of every testbed (or one), with ``alive`` filled in for each process."""
    states = [load_state(state_path(name))] if name else list_states()
    for st in states:
        for proc in st.get("processes", []):
            proc["alive"] = proc_alive(proc["pid"], proc.get("start_time"))
    return states


__all__ = ["STEPS", "down", "namespaces_supported", "status", "testbed", "up"]
