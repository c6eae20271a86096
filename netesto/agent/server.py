"""The agent's ZeroMQ ROUTER loop: requests, replies, pushed events, lease checks, flow output."""

from __future__ import annotations

import logging
import os
import signal
import time
import traceback
from pathlib import Path
from typing import Any

import zmq

from netesto.agent.auth import read_allowlist, secure_socket
from netesto.agent.config import AgentConfig
from netesto.agent.control import HostControl
from netesto.agent.flows import FlowManager
from netesto.agent.handlers import Handlers
from netesto.agent.leftovers import mark_children, stop_leftovers, stop_own
from netesto.agent.lease import Lease
from netesto.agent.observe import Observers
from netesto.agent.links import LinkShaper
from netesto.agent.owner import Ownership, Peer
from netesto.agent.store import DataStore
from netesto.errors import AgentError, NetestoError, ProtocolError, UsageError, VersionMismatch
from netesto.policy import HANDSHAKE_SECONDS
from netesto.protocol.codec import claim_token, encode, encode_result, from_wire, request_parts, unpack
from netesto.protocol.errorkinds import error_kind
from netesto.protocol.keys import load_secret_key
from netesto.protocol.messages import MAX_ID, ErrorInfo, Event, Reply, Request
from netesto.protocol.version import PROTOCOL_VERSION

log = logging.getLogger("netesto.agent")

_SNDMORE = int(zmq.SNDMORE)
_NO_FDS: dict[int, Any] = {}


class _Peer:
    """A ROUTER identity, rendered as hex only if a log line needs it."""

    __slots__ = ("identity",)

    def __init__(self, identity: bytes) -> None:
        self.identity = identity

    def __str__(self) -> str:
        return "peer " + self.identity.hex()[:12]


class Agent:
    """One agent: a ROUTER socket, its handlers and the state they share.

    ``version`` is the protocol version the agent speaks (tests make it speak another).
    """

    def __init__(self, config: AgentConfig, *, version: str = PROTOCOL_VERSION) -> None:
        self.config = config
        self.version = version
        self.store = DataStore(config.datadir)
        self.lease = Lease(config.lease)
        self.control = HostControl(self.store.private / "journal.json", config.name,
                                   netem_fallback=config.netem_fallback)
        self.flows = FlowManager(self.store, config.name, self.push, test_bind=config.test_bind,
                                 flow_port=config.flow_port)
        self.observers = Observers(self.store, config.name)
        self.links = LinkShaper(self.store, config.name)
        self.handlers = Handlers(self)
        self.ownership = Ownership(self.lease)
        self.peer = Peer(b"")  # who sent the request being handled (claim/release need it)
        self.context = zmq.Context()
        self.socket: zmq.Socket | None = None
        self.auth: Any = None
        self.endpoint = ""
        self._running = False
        # what an earlier agent left running, stopped as this one started (netesto.agent.leftovers): in hello until
        # the first claim
        self.stopped_at_start: list[str] = []

    def bind(self) -> str:
        c = self.config
        sock = self.context.socket(zmq.ROUTER)
        sock.linger = 0
        # A hard cap well above our own limit: libzmq disconnects a peer that exceeds
        # it; anything between max_message and the cap is dropped by us with a log line.
        sock.maxmsgsize = 4 * c.max_message
        # A second connection with a routing id in use is refused, not handed the first one's
        # replies and events (a claim never rests on a routing id: see netesto.agent.owner).
        sock.router_handover = 0
        sock.handshake_ivl = int(HANDSHAKE_SECONDS * 1000)  # a silent connection gives its descriptor back
        keys = None if c.insecure else load_secret_key(c.keys, c.key_name) if c.keys else None
        allow = read_allowlist(c.allow) if c.allow else None
        self.auth = secure_socket(self.context, sock, keys=keys, authorized=c.authorized, allow=allow,
                                  insecure=c.insecure)
        if ":" in c.bind:
            sock.ipv6 = True
        host = f"[{c.bind}]" if ":" in c.bind else c.bind
        try:
            if c.port == 0:
                port = sock.bind_to_random_port(f"tcp://{host}")
            else:
                sock.bind(f"tcp://{host}:{c.port}")
                port = c.port
        except zmq.ZMQError as exc:
            raise UsageError(f"cannot listen on {c.bind}:{c.port}: {exc}") from exc
        self.socket = sock
        self.endpoint = f"{c.bind}:{port}"
        mode = "insecure (no CURVE)" if c.insecure else "CURVE"
        log.info("netesto-agent %s listening on tcp://%s (%s, protocol %s, lease %.0f s, data %s)",
                 c.name, self.endpoint, mode, self.version, c.lease, c.datadir)
        if c.ready_file:
            tmp = Path(str(c.ready_file) + ".tmp")
            tmp.write_text(f"{port}\n")
            os.replace(tmp, c.ready_file)
        return self.endpoint

    def push(self, event: str, data: dict[str, Any]) -> None:
        """Send an event to every controller holding the lease (dropped if none)."""
        if self.socket is None or not self.lease.active:
            return
        try:
            frame = encode(Event(event, data, self.version))
        except NetestoError as exc:
            log.warning("event %s not encodable: %s", event, exc)
            return
        for identity in self.lease.holders():
            try:
                self.socket.send_multipart([identity, frame], zmq.NOBLOCK)
            except zmq.ZMQError as exc:
                log.debug("event %s not sent: %s", event, exc)

    def startup(self) -> None:
        unfetched = self.store.experiments()
        if unfetched:
            log.info("unfetched experiments on disk: %s", ", ".join(unfetched))
        if not self.control.journal.empty():
            # A previous run died with changes applied and no controller to finish them.
            log.warning("restore journal not empty at start: restoring")
            self.control.restore()
        for done in self.links.recover():  # links a crashed schedule left changed
            log.warning("restored at start: %s", done)

    def serve(self) -> None:
        if self.socket is None:
            self.bind()
        assert self.socket is not None
        self.startup()
        self._running = True
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        watched: dict[int, Any] = {}
        rcvtimeo = -1
        next_lease_check = 0.0
        while self._running:
            fds = self.flows.fds() if self.flows.runs else _NO_FDS
            if fds.keys() != watched.keys():
                for fd in watched.keys() - fds.keys():
                    poller.unregister(fd)
                for fd in fds.keys() - watched.keys():
                    poller.register(fd, zmq.POLLIN)
            watched = fds
            timeout = 50 if self.flows.runs and self.flows.running() else 200
            sock = self.socket
            if not fds:
                # Only the socket to watch: a blocking receive with a timeout. Measured
                # ~10 us faster per request than zmq.Poller + EVENTS + non-blocking receive.
                if rcvtimeo != timeout:
                    sock.rcvtimeo = rcvtimeo = timeout
                try:
                    frames = sock.recv_multipart(copy=False)
                except zmq.Again:
                    frames = None
                if frames is not None:
                    self.handle_frames(frames)
                ready: dict[Any, int] = {}
            else:
                ready = dict(poller.poll(timeout))
            if sock in ready:
                for _ in range(64):  # bounded so flow output and leases still get turns
                    # EVENTS instead of catching zmq.Again: an exception per loop costs more
                    # than the rest of a small request.
                    if not int(sock.get(zmq.EVENTS)) & zmq.POLLIN:
                        break
                    self.handle_frames(sock.recv_multipart(zmq.NOBLOCK, copy=False))
            if fds:
                for fd, run in fds.items():
                    if fd in ready:
                        self.flows.on_readable(run)
            if self.flows.runs or self.flows.pings.collectors:
                self.flows.reap()
            now = time.monotonic()
            if now >= next_lease_check:  # leases are seconds long: 20 checks a second are plenty
                next_lease_check = now + 0.05
                try:
                    self.check_lease()
                except Exception:  # a failed stop or restore must not take the agent (and its data) down
                    log.error("lease expiry handling failed:\n%s", traceback.format_exc())
        self.shutdown()

    def check_lease(self) -> None:
        lapsed = self.ownership.lapsed()
        state = self.lease.tick()
        if state == "warning":
            self.push("lease_warning", {"host": self.config.name, "remaining": self.lease.remaining()})
        if lapsed is not None or state == "expired":
            # The owning run not heard from for a lease (another controller may still say hello) is
            # gone as surely as a lapsed lease: what it started and changed is undone.
            why = ("the controller's lease expired" if state == "expired" or lapsed is None
                   else f"the lease expired for {lapsed.describe()}")
            stopped = self.flows.stop(reason=f"stopped: {why} (no request for {self.lease.seconds:g} s)")
            dumps = self.control.tcpdump_stop().stopped
            self.observers.stop_all()
            self.flows.stop_tool_servers()
            self.links.stop(None, "the controller's lease expired")
            restored = self.control.restore()
            log.warning("%s (no request for %.1f s): stopped %d flow(s) and %d tcpdump(s), "
                        "restored %s%s; data kept (unfetched: %s)", why, self.lease.seconds, len(stopped), len(dumps),
                        ", ".join(restored.restored) or "nothing",
                        f"; restore errors: {restored.errors}" if restored.errors else "",
                        ", ".join(self.store.experiments()) or "none")

    def _user_id(self, frame: Any) -> str | None:
        """The CURVE public key (z85) the ZAP handler authenticated ``frame``'s connection with."""
        if self.config.insecure or isinstance(frame, bytes):
            return None
        try:
            return str(frame.get("User-Id"))
        except zmq.ZMQError:
            return None

    def handle_frames(self, frames: list[Any]) -> None:
        """One message from the ROUTER: [identity, data], as bytes or as zmq Frames (whose
        metadata name the CURVE key of the connection that sent it)."""
        if len(frames) != 2:
            log.warning("dropped a message of %d frames (expected 1 after the identity)", len(frames) - 1)
            return
        identity, data = (f if isinstance(f, bytes) else f.bytes for f in frames)
        peer = _Peer(identity)
        if len(data) > self.config.max_message:
            log.warning("dropped an oversized message from %s: %d bytes > limit %d", peer, len(data),
                        self.config.max_message)
            return
        try:
            obj = unpack(data, max_size=self.config.max_message)
        except ProtocolError as exc:
            log.warning("dropped a malformed message from %s: %s", peer, exc)
            return
        parts = request_parts(obj, self.version)
        if parts is None:  # anything unusual: full validation, precise errors
            try:
                msg = from_wire(obj, ours=self.version)
            except VersionMismatch as exc:
                log.warning("refused a request from %s: %s", peer, exc)
                rid = getattr(exc, "request_id", 0)
                rid = rid if isinstance(rid, int) and not isinstance(rid, bool) and 0 <= rid <= MAX_ID else 0
                self._send(identity, Reply(rid, False, None, ErrorInfo("VersionMismatch", exc.message,
                                                                       {"ours": exc.ours, "theirs": exc.theirs}),
                                           self.version))
                return
            except ProtocolError as exc:
                log.warning("dropped a malformed message from %s: %s", peer, exc)
                return
            except Exception as exc:  # a peer's frame must never take the agent down
                log.error("dropped a message from %s that failed validation: %r\n%s", peer, exc,
                          traceback.format_exc())
                return
            if not isinstance(msg, Request):
                log.warning("dropped a %s from %s: agents only take requests", type(msg).__name__, peer)
                return
            parts = (msg.id, msg.type, dict(msg.args))
        rid, command, args = parts
        reply: Reply | None = None
        sender = Peer(identity, self._user_id(frames[1]), claim_token(obj))
        try:
            self.ownership.check(sender, command)  # refused: no lease either, it is not our controller
        except AgentError as exc:
            log.info("%s from %s refused: %s", command, peer, exc.message)
            self._send(identity, Reply(rid, False, None, ErrorInfo(error_kind(exc), exc.message, exc.detail),
                                       self.version))
            return
        self.lease.renew(identity)
        self.peer = sender
        try:
            result = self.handlers.dispatch(command, args)
        except NetestoError as exc:
            log.info("%s failed: %s", command, exc.message)
            reply = Reply(rid, False, None, ErrorInfo(error_kind(exc), exc.message, exc.detail), self.version)
        except Exception as exc:  # a bug in a handler must not take the agent down
            log.error("internal error in %s: %s", command, traceback.format_exc())
            reply = Reply(rid, False, None, ErrorInfo("AgentError", f"internal error in {command}: {exc!r}"),
                          self.version)
        if reply is not None:
            self._send(identity, reply)
            return
        try:
            frame = encode_result(rid, result, self.version)
        except ProtocolError as exc:
            self._send(identity, Reply(rid, False, None, ErrorInfo("ProtocolError", f"cannot encode the reply: {exc}"),
                                       self.version))
            return
        self._send_frame(identity, frame, rid)

    def _send(self, identity: bytes, reply: Reply) -> None:
        try:
            data = encode(reply)
        except ProtocolError as exc:
            data = encode(Reply(reply.id, False, None, ErrorInfo("ProtocolError", f"cannot encode the reply: {exc}"),
                                self.version))
        self._send_frame(identity, data, reply.id)

    def _send_frame(self, identity: bytes, data: bytes, rid: int) -> None:
        assert self.socket is not None
        try:
            # Two plain sends: send_multipart's per-frame flag arithmetic (enum
            # objects) costs more than the rest of a small reply's Python work.
            self.socket.send(identity, _SNDMORE)
            self.socket.send(data)
        except zmq.ZMQError as exc:
            log.warning("reply %d not sent: %s", rid, exc)

    def stop(self, *_: Any) -> None:
        self._running = False

    def shutdown(self) -> None:
        self.flows.shutdown()
        self.observers.stop_all()
        self.links.stop(None, "the agent stopped")
        self.control.tcpdump_stop()
        self.control.restore()  # a clean stop leaves the host as it found it (data stays)
        if self.socket is not None:
            self.socket.close(0)
            self.socket = None
        if self.auth is not None:
            self.auth.stop()
            if self.auth.connections is not None:
                self.auth.connections.close()
            self.auth = None
        self.context.term()
        log.info("netesto-agent stopped")


def run(config: AgentConfig, *, agent_class: type[Agent] = Agent) -> int:
    """Serve ``config`` with an ``agent_class`` until SIGTERM or SIGINT; the exit status."""
    mark_children(config.datadir)  # before the agent starts anything (its spare engine client, at once)
    stopped = stop_leftovers(config.datadir)
    agent = agent_class(config)
    agent.stopped_at_start = stopped
    agent.bind()
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    agent.serve()
    stop_own()  # what outlived its stop (netserver's children): a stopped agent leaves nothing behind
    return 0


__all__ = ["Agent", "run"]
