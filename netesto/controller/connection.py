"""The controller's connection to one agent: a DEALER socket speaking the wire protocol (zmq, msgpack).

One socket per connection, used under a lock, so the heartbeat thread (which
renews the agent's lease while the connection is open) and the caller can share
it. Pushed events arriving while we wait for a reply, or during heartbeats,
are handed to the callbacks registered with :meth:`AgentConnection.on_event`.
The commands themselves are :class:`~netesto.controller.client.AgentClient`'s.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Self, TypeVar

import zmq

from netesto.errors import (
    AgentError,
    AgentUnreachable,
    NetestoError,
    ProtocolError,
    VersionMismatch,
)
from netesto.protocol.commands import CommandArgs
from netesto.protocol.codec import DEFAULT_MAX_MESSAGE, encode_request, from_wire, reply_result, unpack
from netesto.protocol.errorkinds import error_from_reply
from netesto.protocol.keys import load_public_key, load_secret_key
from netesto.protocol.messages import ErrorInfo, Event, Reply
from netesto.protocol.replies import CommandReply
from netesto.protocol.text import printable

log = logging.getLogger("netesto.controller.client")
STOP_SLICE_MS = 100  # how soon a request given a stop event notices it (see AgentConnection.request)
# The longest a blocking receive lasts: a signal the main thread's handler must act on (Ctrl-C,
# SIGTERM) waits at most this long even if the kernel delivered it to another thread.
RECV_SLICE_MS = 250
EventCallback = Callable[[Event], None]
R = TypeVar("R", bound=CommandReply)
_HANDSHAKE_EVENTS = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                     | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)


def handshake_failure(head: bytes, where: str) -> str | None:
    """What a handshake event (the first frame of a monitor message) says went wrong, or None."""
    event = zmq.Event(int.from_bytes(head[:2], "little"))
    if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH and int.from_bytes(head[2:6], "little") == 500:
        return (f"{where} refused the connection: the agent holds as many connections as it takes "
                "(netesto.policy.MAX_CONNECTIONS), or failed; its log says which")
    if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return (f"{where} refused our CURVE key: the controller's public key is not among the agent's "
                "authorized keys (or our address is not allowed)")
    if event in (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
        return (f"CURVE handshake with {where} failed: the agent's public key in the lab file does not match "
                "the agent's key (or it is not a netesto-agent)")
    return None


class DropLog:
    """Log lines for dropped messages: the first, then one per 10 s saying how many followed
    (a hostile agent's flood of bad frames must not become a flood on our terminal)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.count, self.logged = 0, -1e9

    def log(self, exc: NetestoError) -> None:
        now = time.monotonic()
        self.count += 1
        if now - self.logged >= 10.0:
            more = f" ({self.count - 1} more since the last such line)" if self.count > 1 else ""
            log.warning("%s: dropped a bad message: %s%s", self.where, printable(exc, 300), more)
            self.count, self.logged = 0, now


def _load_pair(keys: str | Path | tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    return keys if isinstance(keys, tuple) else load_secret_key(keys)


class AgentConnection:
    """One DEALER socket to one agent: requests, replies, pushed events, the heartbeat.

    :meth:`request` blocks until the reply (or ``timeout`` -> AgentUnreachable)."""

    def __init__(
        self,
        name: str,
        address: str,
        port: int = 12870,
        *,
        server_key: str | bytes | Path | None = None,
        client_keys: str | Path | tuple[bytes, bytes] | None = None,
        insecure: bool = False,
        timeout: float = 5.0,
        heartbeat: float = 5.0,
        context: zmq.Context | None = None,
        max_message: int = DEFAULT_MAX_MESSAGE,
    ) -> None:
        if not insecure and (server_key is None or client_keys is None):
            raise NetestoError(f"{name}: CURVE needs server_key (the agent's public key) and client_keys "
                               "(our .key_secret); pass insecure=True only for loopback agents without CURVE")
        self.name = name
        self.address = address
        self.port = port
        self.timeout = timeout
        self.max_message = max_message
        self.where = f"{name} ({address}:{port})"
        self._curve = None if insecure else (load_public_key(server_key), _load_pair(client_keys))  # type: ignore[arg-type]
        self._context = context or zmq.Context.instance()
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._stash: dict[int, Reply] = {}
        self._callbacks: list[EventCallback] = []
        self._last_request = 0.0
        self._closed = False
        self._socket: zmq.Socket | None = None
        self._auth_failure: str | None = None
        # The run's claim token, sent in every request (see netesto.agent.owner): the agent knows
        # the run by it, whichever socket carries the request (a new one after a timeout, say).
        self.claim_token: str | None = None
        self._dropped = DropLog(self.where)
        self._connect()
        self.lease: float | None = None
        self._heartbeat = heartbeat
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        if heartbeat > 0:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"netesto-heartbeat-{name}", daemon=True)
            self._hb_thread.start()

    def _connect(self) -> None:
        sock = self._context.socket(zmq.DEALER)
        sock.linger = 0
        sock.immediate = True  # never queue requests for an agent we are not connected to
        sock.maxmsgsize = 4 * self.max_message
        if self._curve:
            server_key, (public, secret) = self._curve
            sock.curve_serverkey = server_key
            sock.curve_publickey, sock.curve_secretkey = public, secret
        host = self.address
        if ":" in host:
            sock.ipv6 = True
            host = f"[{host}]"
        # A CURVE handshake the agent refuses never connects: without watching for it a
        # wrong key looked like a dead agent, found only after the whole request timeout.
        self._monitor = sock.get_monitor_socket(_HANDSHAKE_EVENTS) if self._curve else None
        sock.connect(f"tcp://{host}:{self.port}")
        self._socket = sock
        self._rcvtimeo = -1

    def _close_socket(self) -> None:
        if self._socket is not None:
            if self._monitor is not None:
                self._socket.disable_monitor()
                self._monitor.close(0)
                self._monitor = None
            self._socket.close(0)
            self._socket = None

    def _check_handshake(self) -> None:
        """AgentError naming host and key when the agent refused our CURVE handshake
        (kept: every later request, the heartbeat's too, fails the same way at once)."""
        while self._auth_failure is None and self._monitor is not None and self._monitor.poll(0):
            self._auth_failure = handshake_failure(self._monitor.recv_multipart()[0], f"{self.address}:{self.port}")
        if self._auth_failure is not None:
            raise AgentError(self._auth_failure, host=self.name, kind="AuthFailed")

    def _reset(self) -> None:
        """Drop the socket (and anything queued on it) after a timeout."""
        self._close_socket()
        self._stash.clear()
        self._connect()

    def _unreachable(self, what: str, waited: float) -> AgentUnreachable:
        """No answer to ``what`` after ``waited`` seconds (what the caller really waited)."""
        err = AgentUnreachable(f"no answer to {what} in {waited:.3g} s from {self.address}:{self.port} "
                               "(agent down, wrong key, or address not allowed?)", host=self.name)
        err.timed_out = True  # type: ignore[attr-defined]
        return err

    def send_request(self, type: str, args: Mapping[str, Any], deadline: float,
                     stop: threading.Event | None = None) -> int:
        """Send request ``type`` (waiting until ``deadline`` for room); its id. ``stop``: see :meth:`request`."""
        assert self._socket is not None
        rid = next(self._ids)
        data = encode_request(rid, type, dict(args), claim=self.claim_token)
        while True:
            try:
                self._socket.send(data, zmq.NOBLOCK)
                break
            except zmq.Again:
                self._check_handshake()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._unreachable(type, self.timeout) from None
                self._check_stop(stop, type)
                self._socket.poll(int(min(left, 0.1) * 1000) + 1, zmq.POLLOUT)
        self._last_request = time.monotonic()
        return rid

    def receive_reply(self, rid: int, what: str, deadline: float) -> Reply:
        """The reply to ``rid`` (events and other replies met on the way are dispatched or stashed)."""
        while True:
            ok, result = self._receive_result(rid, what, deadline)
            if ok:
                return Reply(rid, True, result)
            if rid in self._stash:
                return self._stash.pop(rid)

    def _receive_result(self, rid: int, what: str, deadline: float,
                        stop: threading.Event | None = None) -> tuple[bool, Any]:
        """``(True, result)`` for a successful reply to ``rid`` (the common case, no message
        objects built); ``(False, None)`` once any reply to ``rid`` was stashed instead.
        ``stop``: see :meth:`request`."""
        assert self._socket is not None
        while True:
            if rid in self._stash:
                return False, None
            left = deadline - time.monotonic()
            if left <= 0:
                self._reset()
                raise self._unreachable(what, self.timeout)
            self._check_stop(stop, what)
            # A blocking recv with a receive timeout: cheaper than poll() + recv().
            ms = max(1, min(RECV_SLICE_MS if stop is None else STOP_SLICE_MS, int(left * 1000)))
            if ms != self._rcvtimeo:
                self._socket.rcvtimeo = self._rcvtimeo = ms
            try:
                data = self._socket.recv()
            except zmq.Again:
                continue
            try:
                obj = unpack(data, max_size=self.max_message)
            except ProtocolError as exc:
                self._dropped.log(exc)
                continue
            ok, result = reply_result(obj, rid)
            if ok:
                return True, result
            self._take(obj, rid, what)

    def _take(self, obj: Any, rid: int | None = None, what: str = "") -> None:
        """Handle a frame that is not the awaited successful reply: dispatch events, stash replies."""
        try:
            msg = from_wire(obj)
        except VersionMismatch as exc:
            raise VersionMismatch(exc.ours, exc.theirs, host=self.where) from exc
        except ProtocolError as exc:
            if rid is not None and isinstance(obj, dict) and obj.get("k") == "rep" and obj.get("id") == rid:
                # The awaited reply itself is broken: say so now rather than time out.
                raise ProtocolError(f"{self.where}: malformed reply to {what}: {exc.message}") from exc
            self._dropped.log(exc)
            return
        if isinstance(msg, Event):
            self._dispatch(msg)
        elif isinstance(msg, Reply):
            self._stash[msg.id] = msg  # a pipelined reply (or a late one, dropped at reset)
            if len(self._stash) > 1024:
                self._stash.clear()

    def _dispatch(self, event: Event) -> None:
        event = Event(event.event, {**event.data, "agent": self.name}, event.version)
        for callback in list(self._callbacks):
            try:
                callback(event)
            except Exception:  # a bad callback must not break the connection
                log.exception("%s: event callback failed", self.where)

    def reply_value(self, reply: Reply, what: str) -> Any:
        if reply.ok:
            return reply.result
        err = reply.error or ErrorInfo("AgentError", "unknown error")
        raise self._error(err, what)

    def _error(self, err: ErrorInfo, what: str) -> NetestoError:
        return error_from_reply(err, host=self.name, where=self.where, what=what)

    def _check_stop(self, stop: threading.Event | None, what: str) -> None:
        if stop is not None and stop.is_set():
            raise AgentUnreachable(f"{what} to {self.address}:{self.port} given up: the connection is closing",
                                   host=self.name)

    def request(self, type: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None,
                stop: threading.Event | None = None) -> Any:
        """Send one request and return its result (or raise the agent's error). With ``stop``, the
        wait is given up (AgentUnreachable) within :data:`STOP_SLICE_MS` of it being set: the
        heartbeat's request to an agent that died does not hold :meth:`close` for its timeout."""
        if self._closed:
            raise AgentError("client is closed", host=self.name)
        timeout = self.timeout if timeout is None else timeout
        t0 = time.monotonic()
        try:
            with self.lock:  # the heartbeat may hold it for its own timeout: that wait counts too
                deadline = time.monotonic() + timeout
                rid = self.send_request(type, args or {}, deadline, stop)
                ok, result = self._receive_result(rid, type, deadline, stop)
                return result if ok else self.reply_value(self._stash.pop(rid), type)
        except AgentUnreachable as exc:
            if getattr(exc, "timed_out", False):  # say how long we really waited
                raise self._unreachable(type, time.monotonic() - t0) from None
            raise

    def call(self, cls: type[R], args: CommandArgs | None = None, *, timeout: float | None = None) -> R:
        """Send command ``cls.command`` with its payload ``args`` (a :mod:`netesto.protocol.commands`
        class; None: no arguments) and read its result as ``cls`` (or raise the agent's error)."""
        if args is not None and args.command != cls.command:
            raise TypeError(f"{type(args).__name__} is the payload of {args.command!r}, not of {cls.command!r}")
        return self.read(cls, self.request(cls.command, args.to_wire() if args is not None else None,
                                           timeout=timeout))

    def read(self, cls: type[R], result: Any) -> R:
        """``result`` as reply class ``cls``; ProtocolError naming this agent, the command and the field."""
        try:
            return cls.from_wire(result)
        except ProtocolError as exc:
            raise ProtocolError(f"{self.where}: {exc.message}") from exc

    def _heartbeat_loop(self) -> None:
        # Tick often and compare with the current period: hello() may learn a
        # lease shorter than the period this thread started with.
        while not self._hb_stop.wait(0.1):
            period = min(self._heartbeat, (self.lease or 1e9) / 3)
            if time.monotonic() - self._last_request < period:
                continue
            try:
                self.request("heartbeat", stop=self._hb_stop)
            except NetestoError as exc:
                log.debug("%s: heartbeat failed: %s", self.where, exc)
                # A period before the next try: failing heartbeats back to back held the lock
                # (and every caller waiting for it) all the time an agent was dead.
                self._last_request = time.monotonic()

    def on_event(self, callback: EventCallback) -> None:
        """Call ``callback(event)`` for each pushed event (``event.event``, ``event.data``;
        ``data["agent"]`` is this client's name). Runs in the thread that is talking to the agent."""
        self._callbacks.append(callback)

    def poll_events(self, timeout: float = 0.0) -> None:
        """Deliver pushed events that arrived while no request was in flight. Returns at once
        while a request holds the connection (it delivers the events it meets itself): a
        WAIT that polls events must not last as long as a heartbeat to a dead agent."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            assert self._socket is not None
            end = time.monotonic() + timeout
            while self._socket.poll(int(max(0.0, end - time.monotonic()) * 1000), zmq.POLLIN):
                try:
                    obj = unpack(self._socket.recv(), max_size=self.max_message)
                except ProtocolError as exc:
                    self._dropped.log(exc)
                    continue
                self._take(obj)
        finally:
            self.lock.release()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._hb_stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=2 * self.timeout)
        with self.lock:
            self._close_socket()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["AgentConnection", "EventCallback"]
