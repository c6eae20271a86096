"""Run many client flows: worker processes (each one event loop), driver flows, one event stream.

The parent forks ``workers`` processes and deals the built-in flows out
round-robin; each worker multiplexes its flows on one epoll loop and writes
JSON event lines to a pipe. Flows whose ``driver`` is ``iperf3`` or
``netperf`` run in a process of their own through
``netesto.drivers.<driver>.run_flow(spec, datadir, emit)``. The parent prints
every event line to its output as it arrives and returns 1 if any flow failed.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any, Callable, Sequence

from netesto.collectors import tcpinfo
from netesto.engine.core.balance import deal
from netesto.engine.kinds.client import ClientFlow, StreamClient
from netesto.engine.kinds.client_crr import CRRClient
from netesto.engine.kinds.client_rr import RRClient
from netesto.engine.kinds.client_udp import UDPClient
from netesto.engine.kinds.client_wcrr import DrawnCRRClient
from netesto.engine.kinds.client_wrr import DrawnRRClient
from netesto.engine.kinds.flowend import FlowEnd, Worker, check_datadir, json_line
from netesto.engine.core.loop import STOP_GRACE, Loop, stop_on_signals
from netesto.errors import TrafficError
from netesto.procs import die_with_parent, orphaned, precise_timers
from netesto.protocol.flowspec import FlowSpec


CLIENT_TYPES: dict[str, type[ClientFlow]] = {
    "TCP_STREAM": StreamClient,
    "TCP_MAERTS": StreamClient,
    "TCP_BIDIR": StreamClient,
    "TCP_RR": RRClient,
    "TCP_CRR": CRRClient,
    "UDP_STREAM": UDPClient,
    "UDP_RR": UDPClient,
}
# drawn sizes and gaps (FlowSpec.workload; docs/workloads.md): TCP_RR and TCP_CRR in Python
DRAWN_CLIENT_TYPES: dict[str, type[ClientFlow]] = {"TCP_RR": DrawnRRClient, "TCP_CRR": DrawnCRRClient}


def check_congestion_control(spec: FlowSpec) -> None:
    """Fail early (before any connection) on a congestion control this host lacks."""
    if not spec.test.startswith("TCP") or not spec.ca:
        return
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        tcpinfo.set_congestion_control(probe, spec.ca)
    finally:
        probe.close()


class ClientWorker(Worker):
    """A worker process's flows; reports each flow's end as a done/error event."""

    def on_flow_done(self, flow: FlowEnd, summary: dict[str, Any]) -> None:
        event: dict[str, Any] = {"event": "error" if flow.error else "done", "flow": flow.spec.flow_id}
        if flow.error:
            event["message"] = event["error"] = flow.error
        event["summary"] = {k: v for k, v in summary.items() if k != "latency_hist"}
        self.emit(event)


def run_worker(specs: Sequence[FlowSpec], datadir: str, emit: Callable[[dict[str, Any]], None],
               sample_duty: float = 0.0) -> int:
    """Run built-in flows on one event loop in this process; 1 if any failed."""
    loop = Loop()
    worker = ClientWorker(loop, datadir, emit)
    worker.sampler.duty = sample_duty
    precise_timers()  # flows start at their instant to the microsecond, not to the 50 us slack

    stop_on_signals(lambda signum: _Stop(signal.Signals(signum).name))
    for spec in specs:
        flow = (DRAWN_CLIENT_TYPES if spec.workload else CLIENT_TYPES)[spec.test](worker, spec)
        worker.flows.append(flow)
        try:
            check_congestion_control(spec)
        except TrafficError as exc:
            flow.fail(exc.message)
            continue
        flow.schedule()
    try:
        loop.run(lambda: not worker.flows)
    except _Stop as stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for end in list(worker.flows):
            when = f" after {end.elapsed():.1f} s" if end.start_mono else " before it started"
            end.finish(f"stopped by {stop}{when}")
    loop.close()
    return 1 if worker.failed else 0


def _worker_main(specs: Sequence[FlowSpec], datadir: str, sample_duty: float,
                 emit: Callable[[dict[str, Any]], None]) -> int:
    return run_worker(specs, datadir, emit, sample_duty)


class _Stop(BaseException):
    """SIGTERM/SIGINT in a worker: end every flow with an error, keep the data."""


def _run_driver(spec: FlowSpec, datadir: str, emit: Callable[[dict[str, Any]], None]) -> int:
    try:
        module = importlib.import_module(f"netesto.drivers.{spec.driver}")
        run_flow = module.run_flow
    except (ImportError, AttributeError) as exc:
        emit({"event": "error", "flow": spec.flow_id,
              "message": f"driver {spec.driver!r} is not available: {exc}"})
        return 1
    if spec.start_at is not None:
        delay = spec.start_at - time.time()
        if delay > 0:
            time.sleep(delay)
    try:
        ok = run_flow(spec, datadir, emit)
    except Exception as exc:  # a driver bug must not take the other flows down
        emit({"event": "error", "flow": spec.flow_id, "message": f"driver {spec.driver} failed: {exc}"})
        return 1
    return 0 if ok else 1


def _fork(target: Callable[[Callable[[dict[str, Any]], None]], int]) -> tuple[int, int]:
    """Start ``target(emit)`` in a child; returns (pid, read end of its event pipe)."""
    rfd, wfd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(parent)
        os.close(rfd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

        def emit(event: dict[str, Any]) -> None:
            data = json_line(event)
            try:
                while data:
                    data = data[os.write(wfd, data):]
            except OSError:
                pass  # the parent is gone: the files still get written

        code = 1
        try:
            code = target(emit)
        except BaseException as exc:  # report, then exit: never return into the parent's code
            try:
                emit({"event": "worker-error", "message": f"{type(exc).__name__}: {exc}"})
            except OSError:
                pass
        finally:
            os._exit(code)
    os.close(wfd)
    return pid, rfd


def run_client(
    specs: Sequence[FlowSpec],
    datadir: str,
    *,
    workers: int | None = None,
    out: Callable[[dict[str, Any]], None] | None = None,
    sample_duty: float = 0.0,
) -> int:
    """Run every flow; call ``out(event)`` for each event (default: print JSON lines).
    ``sample_duty`` is for bench_sampling only (see :func:`~netesto.engine.sampling.sampler.bench_window_sampled`).

    Returns 0 when every flow ended OK, 1 otherwise.
    """
    if out is None:
        def out(event: dict[str, Any]) -> None:
            try:
                sys.stdout.write(json.dumps(event, separators=(",", ":"), default=str) + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                pass  # nobody listens any more; the flows still finish and write their files

    check_datadir(datadir)
    owner = os.getppid()  # (checked while the flows run: docs/agents.md)
    builtin = [s for s in specs if s.driver == "builtin"]
    drivers = [s for s in specs if s.driver != "builtin"]
    nworkers = max(1, min(workers or 2, len(builtin))) if builtin else 0
    sys.stdout.flush()
    children: dict[int, tuple[int, list[str]]] = {}  # rfd -> (pid, flow ids)
    for dealt in deal([s.test for s in builtin], nworkers):
        mine = [builtin[k] for k in dealt]
        pid, rfd = _fork(functools.partial(_worker_main, mine, datadir, sample_duty))
        children[rfd] = (pid, [s.flow_id for s in mine])
    for spec in drivers:
        pid, rfd = _fork(functools.partial(_run_driver, spec, datadir))
        children[rfd] = (pid, [spec.flow_id])

    stopping: list[float] = []  # monotonic time of the first SIGTERM/SIGINT

    def forward(signum: int, frame: object) -> None:
        # The signal we got, not SIGTERM: after Ctrl-C a worker may see our copy before the
        # terminal's, and its flows' errors name the signal the user sent.
        if not stopping:
            stopping.append(time.monotonic())
        _signal_all(children, signum)

    def stop_if_orphaned() -> None:
        # a client whose parent is gone without its death signal having stopped it (netesto.procs.orphaned)
        if not stopping and orphaned(owner):
            forward(signal.SIGTERM, None)

    old_term = signal.signal(signal.SIGTERM, forward)
    old_int = signal.signal(signal.SIGINT, forward)
    try:
        return _collect(children, drivers, out, stopping, stop_if_orphaned)
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def _signal_all(children: dict[int, tuple[int, list[str]]], signum: int) -> None:
    for pid, _ in children.values():
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _collect(children: dict[int, tuple[int, list[str]]], drivers: Sequence[FlowSpec],
             out: Callable[[dict[str, Any]], None], stopping: list[float], tick: Callable[[], None]) -> int:
    """Print the children's events as they come; reap them; 1 if any flow failed.

    Once we were told to stop (``stopping`` holds the time), children get
    :data:`STOP_GRACE` seconds to end their flows and write their files; any
    still there then is killed, so none outlives us by more than a moment.
    ``tick()`` is called at least every 0.25 s until then.
    """
    ended: dict[str, bool] = {}  # flow id -> ok
    bufs = {rfd: b"" for rfd in children}
    open_fds = set(children)
    killed = False
    while open_fds:
        # Bounded: select is retried after a signal handler with its old timeout (PEP 475).
        timeout = None if killed else 0.25
        if stopping and not killed and time.monotonic() >= stopping[0] + STOP_GRACE:
            _signal_all(children, signal.SIGKILL)
            killed = True
        if not killed:
            tick()
        ready, _, _ = select.select(list(open_fds), [], [], timeout)
        for rfd in ready:
            try:
                data = os.read(rfd, 65536)
            except InterruptedError:
                continue
            if not data:
                open_fds.discard(rfd)
                os.close(rfd)
                continue
            bufs[rfd] += data
            *lines, bufs[rfd] = bufs[rfd].split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") in ("done", "error") and "flow" in event:
                    ended[event["flow"]] = ended.get(event["flow"], True) and event["event"] == "done"
                out(event)
    for rfd, (pid, flows) in children.items():
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        for flow_id in flows:
            if flow_id not in ended:
                out({"event": "error", "flow": flow_id,
                     "message": f"flow process {pid} ended (status {code}) without reporting the flow"})
                ended[flow_id] = False
            elif code != 0 and ended[flow_id] and len(flows) == 1 and flow_id in [s.flow_id for s in drivers]:
                ended[flow_id] = False
    failed = not all(ended.values())
    return 1 if failed else 0


def load_specs(path: str) -> list[FlowSpec]:
    """FlowSpecs from a JSON file holding a list of FlowSpec dicts."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise TrafficError(f"cannot read flow specs from {path}: {exc}") from exc
    if isinstance(data, dict):
        data = data.get("flows", [data])
    if not isinstance(data, list):
        raise TrafficError(f"{path}: expected a JSON list of flow specs")
    return [FlowSpec.from_dict(d) for d in data]


__all__ = ["CLIENT_TYPES", "check_congestion_control", "load_specs", "run_client", "run_worker"]
