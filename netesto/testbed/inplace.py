"""Change a running testbed's bottleneck in place: rate, buffer, RTT (also per host), jitter, loss.

A sweep over bandwidth and RTT runs every point on the same namespaces and
agents; tearing the testbed down between points would cost seconds and new
keys. ``reshape("tb", bw="10mbit", rtt="40ms")`` changes the htb rate and the
bfifo limit on each router link and the delay (netem on the hosts' egress, or
the delay line's queues where the kernel has no netem), and records the new
settings in the testbed's state, so an agent's restore and the bottleneck
guard put back these settings rather than the first ones. ``host_rtt="h3:40ms"``
gives a host paths of an RTT of their own (:func:`netesto.testbed.config.one_way_delays`).

Reshaping is an operation on a claimed lab, as a run is: on a testbed with
agents it takes a ``claim`` held on the testbed's lab (a
:class:`netesto.controller.claim.LabClaim`, or anything with its ``lab_file`` and
``renew()``), renewed before anything changes, so a reshape can never change the
RTT under a run that holds the lab. The state remembers the shape the testbed
was brought up with: ``netesto testbed status`` says when it is reshaped away
from it, and ``reshape(name, configured=True)`` puts it back.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Protocol

from netesto.errors import TestbedError
from netesto.labfile import update_testbed
from netesto.testbed import shaping
from netesto.testbed.buffers import size_buffers
from netesto.testbed.config import one_way_delays, parse_host_rtt, parse_loss
from netesto.testbed.delayline import send_control
from netesto.testbed.state import load_state, machine_lock, save_state, state_path

SHAPES = ("bw", "rtt", "buffer", "loss", "jitter", "host_rtt")
_CONFIG_KEYS = ("bw_bps", "rtt_ms", "buffer_bytes", "loss", "jitter_ms")


class Claim(Protocol):
    """What a reshape needs of a claim (:class:`netesto.controller.claim.LabClaim` is one)."""

    @property
    def lab_file(self) -> Path | None: ...

    def renew(self) -> None: ...


def _check_claim(name: str, state: dict[str, Any], claim: Claim | None) -> None:
    """TestbedError unless ``claim`` holds testbed ``name``'s lab (a testbed without agents has
    nobody to come between); the claim's own error if an agent no longer holds it."""
    if not any(p.get("kind") == "agent" for p in state.get("processes", [])):
        return
    lab = state.get("lab", "")
    if claim is None:
        raise TestbedError(
            f"testbed {name!r} has agents: a reshape would change the bottleneck under any run on it. Reshape "
            f"under a claim of its lab: with LabClaim(Lab.from_file({str(lab)!r})) as claim: "
            f"reshape({name!r}, ..., claim=claim)  (netesto.controller.claim.LabClaim)")
    held = claim.lab_file
    if held is None or Path(held).resolve() != Path(lab).resolve():
        raise TestbedError(f"the claim is on lab {held}, not on testbed {name!r}'s lab {lab}")
    claim.renew()  # an AgentError "lab busy: run ..." if a run holds the lab


def reshape(name: str, *, bw: str | int | None = None, rtt: str | float | None = None,
            buffer: str | int | None = None, loss: str | float | None = None,
            jitter: str | float | None = None, host_rtt: str | dict[str, Any] | None = None,
            claim: Claim | None = None, configured: bool = False) -> dict[str, Any]:
    """Set what is given (``None`` keeps the current value) on testbed ``name``;
    returns the settings now in force (``bw_bps``, ``rtt_ms``, ``buffer_bytes``,
    ``loss``, ``jitter_ms``, ``host_rtt``). A buffer in BDPs (``"1bdp"``) is taken against the
    new rate and RTT; without ``buffer`` the queue keeps its bytes. ``host_rtt`` (``"h3:40ms"``,
    ``""`` for none) replaces the hosts' own RTTs. ``configured`` starts from the shape the
    testbed was brought up with instead of the current one.
    A testbed with agents needs ``claim``, held on its lab (see the module's text)."""
    path = state_path(name)
    with machine_lock():
        state = load_state(path)
        if state.get("mode") != "netns":
            raise TestbedError(f"testbed {name!r} runs on loopback (no namespaces here): it has no bottleneck to reshape")
        if state.get("status") != "up":
            raise TestbedError(f"testbed {name!r} is {state.get('status')!r}, not up")
        _check_claim(name, state, claim)
        cfg = state["config"]
        first = state.setdefault("configured", {**{k: cfg[k] for k in _CONFIG_KEYS},
                                                "host_rtt": cfg.get("host_rtt") or []})
        if configured:
            cfg = {**cfg, **first}
        bw_bps = shaping.parse_rate(bw) if bw is not None else int(cfg["bw_bps"])
        rtt_ms = shaping.parse_time_ms(rtt) if rtt is not None else float(cfg["rtt_ms"])
        buffer_bytes = shaping.parse_buffer(buffer, bw_bps, rtt_ms) if buffer is not None else int(cfg["buffer_bytes"])
        loss_p = parse_loss(loss) if loss is not None else float(cfg["loss"])
        jitter_ms = shaping.parse_time_ms(jitter) if jitter is not None else float(cfg["jitter_ms"])
        kept = {str(h): float(ms) for h, ms in cfg.get("host_rtt", []) or []}
        own = parse_host_rtt(host_rtt, len(state["links"]), rtt_ms) if host_rtt is not None else kept
        if host_rtt is None:  # kept: still at least half the new rtt?
            parse_host_rtt(own, len(state["links"]), rtt_ms)
        delays = one_way_delays(rtt_ms, own, [lk["host"] for lk in state["links"]])
        _apply(state, bw_bps, buffer_bytes, delays, jitter_ms / 2, loss_p)
        for lk in state["links"]:  # the hosts' socket buffers follow the new bottleneck
            state["socket_buffers"] = size_buffers(lk["ns"], bw_bps, rtt_ms, buffer_bytes)
        now = dict(bw_bps=bw_bps, rtt_ms=rtt_ms, buffer_bytes=buffer_bytes, loss=loss_p, jitter_ms=jitter_ms)
        state["config"].update(now, host_rtt=sorted([h, ms] for h, ms in own.items()))
        state["bw_bps"] = bw_bps
        _note_shape(state, first, now)
        save_state(path, state)
        if state.get("lab"):  # what the controller reads: the next run records the new shape
            update_testbed(Path(state["lab"]), {"name": name, "mode": "netns", "bw": bw_bps, "rtt": rtt_ms,
                                                "buffer": buffer_bytes, "loss": loss_p, "jitter": jitter_ms,
                                                **({"host_rtt": own} if own else {})})
    return {"bw_bps": bw_bps, "rtt_ms": rtt_ms, "buffer_bytes": buffer_bytes, "loss": loss_p, "jitter_ms": jitter_ms,
            "host_rtt": own}


def _note_shape(state: dict[str, Any], first: dict[str, Any], now: dict[str, Any]) -> None:
    """Say in the state's notes (``netesto testbed status``) whether the shape is still the one the
    testbed came up with: a sweep leaves its last point's, and the next user should know."""
    notes = [n for n in state.get("notes", []) if not str(n).startswith("reshaped")]
    changed = [f"{k} {now[k]:g} (configured {first[k]:g})" for k in _CONFIG_KEYS if float(now[k]) != float(first[k])]
    own, was = state["config"].get("host_rtt") or [], first.get("host_rtt") or []
    if own != was:
        changed.append(f"host_rtt {own or 'none'} (configured {was or 'none'})")
    if changed:
        when = _dt.datetime.now().isoformat(timespec="seconds")
        notes.append(f"reshaped at {when}: {', '.join(changed)}; reshape(name, configured=True) puts it back")
    state["notes"] = notes


def host_delay(state: dict[str, Any], queue: int, delay: float, jitter: float, loss: float) -> None:
    """Set the delay line's queue ``queue`` (toward one host) to ``delay`` ms one way."""
    control = state.get("delayline_control")
    if not control:
        raise TestbedError(f"testbed {state.get('name')!r} has no delay line to set the RTT with")
    reply = send_control(control, {"queue": queue, "delay": delay, "jitter": jitter, "loss": loss})
    if not reply.get("ok"):
        raise TestbedError(f"delay line of testbed {state.get('name')!r} refused the new delay: {reply.get('error')}")


def _apply(state: dict[str, Any], bw_bps: int, buffer_bytes: int, delays: dict[str, float], jitter: float,
           loss: float) -> None:
    router = state["router_ns"]
    for lk in state["links"]:
        shaping.change_rate(router, lk["router_dev"], bw_bps)
        shaping.change_buffer(router, lk["router_dev"], buffer_bytes)
        if state.get("delay_mode") == "netem":
            shaping.setup_netem(lk["ns"], lk["dev"], delays[lk["host"]], jitter, loss)
            continue
        host_delay(state, lk["queue"], delays[lk["host"]], jitter, loss)


__all__ = ["SHAPES", "reshape"]
