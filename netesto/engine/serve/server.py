"""The server side (the netserver of netesto): listen, run the server processes until stopped.

One listening socket per worker process (``--workers N`` > 1 uses
SO_REUSEPORT so the kernel spreads connections). Connections are accepted
and handshaken in :mod:`~netesto.engine.serve.accept`, flows served in
:mod:`~netesto.engine.kinds.serverflow` and beside it. Each accepted flow writes
``<datadir>/<exp>/flows/<flow_id>.server.nflow``.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any, Callable, Iterable, NoReturn

from netesto.engine.serve.accept import HANDSHAKE_TIMEOUT, ServerWorker
from netesto.engine.serve.tokens import TokenSet
from netesto.engine.core.balance import LoadBoard
from netesto.engine.kinds.flowend import check_datadir, describe_error, json_line
from netesto.engine.core.loop import STOP_GRACE, Loop, stop_on_signals
from netesto.errors import TrafficError
from netesto.procs import die_with_parent, orphaned

PARENT_CHECK = 1.0  # seconds between a server process's checks that its parent still runs


class _Stop(BaseException):
    pass


def make_listener(bind: str, port: int, reuseport: bool) -> socket.socket:
    try:
        infos = socket.getaddrinfo(bind or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, addr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuseport:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
        sock.listen(1024)
    except OSError as exc:
        raise TrafficError(f"cannot listen on {bind or '*'}:{port}: {describe_error(exc)}") from exc
    return sock


def _stdout_emit(event: dict[str, Any]) -> None:
    """Best effort: an event is dropped rather than block the server on a full stdout pipe.

    (Nobody may be reading a long-lived server's output; a blocked write would
    stall every flow. A pipe that selects writable takes PIPE_BUF bytes atomically.)
    """
    data = json_line(event)
    try:
        _, writable, _ = select.select([], [1], [], 0)
        if writable:
            os.write(1, data)
    except OSError:
        pass


def _serve_one(listener: socket.socket, datadir: str, tokens: TokenSet,
               emit: Callable[[dict[str, Any]], None], handshake_timeout: float, parent: int,
               index: int = 0, inbox: socket.socket | None = None,
               peers: dict[int, socket.socket] | None = None, board: LoadBoard | None = None,
               sample_duty: float = 0.0) -> None:
    loop = Loop()
    worker = ServerWorker(loop, datadir, emit, listener, tokens, handshake_timeout)
    worker.sampler.duty = sample_duty
    worker.set_peers(index, inbox, peers or {}, board)

    try:  # a signal may arrive while the handlers are being installed
        stop = stop_on_signals(lambda signum: _Stop())
        _watch_parent(loop, parent, stop)
        loop.run(lambda: False)
    except _Stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        worker.stop("server stopped")


def _watch_parent(loop: Loop, parent: int, stop: Callable[[int], NoReturn]) -> None:
    """Every :data:`PARENT_CHECK` seconds: ``stop`` if ``parent`` is gone and its death signal has not
    stopped us (:func:`~netesto.procs.orphaned`)."""
    sig = orphaned(parent)
    if sig:
        stop(sig)
    loop.call_later(PARENT_CHECK, lambda: _watch_parent(loop, parent, stop))


def default_workers() -> int:
    """Server processes when none are asked for: one per usable CPU (at most 8)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


def serve(bind: str, port: int, datadir: str, *, tokens: Iterable[str] = (),
          token_file: str | None = None, workers: int = 1,
          handshake_timeout: float = HANDSHAKE_TIMEOUT,
          emit: Callable[[dict[str, Any]], None] = _stdout_emit, sample_duty: float = 0.0) -> int:
    """Run the server until SIGTERM/SIGINT (flows in progress end with status error).

    ``workers`` processes share the port (SO_REUSEPORT); new flows go to the
    least-loaded one (:class:`~netesto.engine.core.balance.LoadBoard`); 0 means
    :func:`default_workers`. ``sample_duty`` is for bench_sampling only (see
    :func:`~netesto.engine.sampling.sampler.bench_window_sampled`).
    """
    if workers < 0:
        raise TrafficError(f"workers must be >= 0 (0: one per usable CPU), got {workers}")
    if not 0 <= port <= 65535:  # getaddrinfo would take 99999 as 34463
        raise TrafficError(f"port must be 0..65535 (0: any), got {port}")
    check_datadir(datadir)
    token_set = TokenSet(tokens, token_file)
    workers = default_workers() if workers == 0 else workers
    owner = os.getppid()  # (had it died already, its death signal would have ended us)
    first = make_listener(bind, port, workers > 1)
    port = first.getsockname()[1]
    emit({"event": "listening", "bind": bind, "port": port, "workers": workers, "pid": os.getpid()})
    if workers == 1:
        _serve_one(first, datadir, token_set, emit, handshake_timeout, owner, sample_duty=sample_duty)
        return 0
    children = []
    inboxes = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(workers)]
    board = LoadBoard(workers)
    parent = os.getpid()
    for index in range(workers):
        listener = first if index == 0 else make_listener(bind, port, True)
        pid = os.fork()
        if pid == 0:
            die_with_parent(parent)
            code = 0
            peers = {j: pair[0] for j, pair in enumerate(inboxes) if j != index}
            try:
                _serve_one(listener, datadir, token_set, emit, handshake_timeout, parent,
                           index, inboxes[index][1], peers, board, sample_duty)
            except BaseException:  # say what ended this worker: its exit status alone cannot
                traceback.print_exc()
                code = 1
            os._exit(code)
        children.append(pid)
        if index:
            listener.close()
    first.close()
    for pair in inboxes:
        pair[0].close()
        pair[1].close()
    return _reap(children, owner)


def _reap(children: list[int], owner: int) -> int:
    """Wait for the workers; 1 if any ended badly.

    A stop (SIGTERM/SIGINT) is passed on to them, and those still running
    :data:`STOP_GRACE` seconds later are killed: a worker stuck in its stop
    never keeps the server, and whoever waits for it, forever. A server whose
    parent ``owner`` is gone without its death signal having stopped it stops
    as if that signal had come (:func:`~netesto.procs.orphaned`).
    """
    stopping: list[float] = []
    pids = {os.pidfd_open(pid): pid for pid in children}  # (a pidfd polls readable once its process ends)

    def send(sig: int) -> None:
        for fd in pids:
            try:
                signal.pidfd_send_signal(fd, sig)
            except ProcessLookupError:  # ended, not reaped yet
                pass

    def forward(signum: int, frame: object) -> None:
        if not stopping:
            stopping.append(time.monotonic())
        send(signal.SIGTERM)

    poller = select.poll()
    for fd in pids:
        poller.register(fd, select.POLLIN)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    killed = False
    while pids:
        if stopping and not killed and time.monotonic() >= stopping[0] + STOP_GRACE:
            send(signal.SIGKILL)
            killed = True
        if not stopping and orphaned(owner):
            forward(signal.SIGTERM, None)
        for fd, _ in poller.poll(250):  # (ms; retried after a handler, PEP 475)
            poller.unregister(fd)
            pid = pids.pop(fd)
            os.close(fd)
            _, st = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(st)
            if code:
                how = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
                print(f"netesto.engine server: worker {pid} ended with {how}", file=sys.stderr, flush=True)
                status = 1
    return status


__all__ = ["default_workers", "make_listener", "serve"]
