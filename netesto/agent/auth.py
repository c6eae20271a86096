"""The agent's CURVE server side: the ZAP authenticator (which logs every refusal with the peer address,
and refuses connections beyond :data:`~netesto.policy.MAX_CONNECTIONS`), allowlists."""

from __future__ import annotations

import ipaddress
import logging
import time
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from netesto.errors import UsageError
from netesto.policy import MAX_CONNECTIONS
from netesto.protocol.text import printable

log = logging.getLogger("netesto.agent.auth")
DOMAIN = "netesto"


def authorized_keys(directory: str | Path) -> frozenset[bytes]:
    """The z85 public keys of ``directory/*.key``; an unreadable file is skipped with a log line
    (zmq.auth's own loader drops the whole directory for one bad file, refusing every controller)."""
    keys = set()
    for path in sorted(Path(directory).glob("*.key")):
        try:
            public, _ = zmq.auth.load_certificate(str(path))
        except (OSError, ValueError) as exc:
            log.error("authorized key %s skipped: %s", path, exc)
            continue
        if public:
            keys.add(public)
    return frozenset(keys)


class _KeySet:
    """A CURVE credentials provider for zmq.auth: a fixed set of z85 public keys."""

    def __init__(self, keys: frozenset[bytes]) -> None:
        self.keys = keys

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self.keys


def read_allowlist(path: str | Path) -> list[str]:
    """Addresses from a ``clients.txt``-style file: one per line; ``#`` starts a comment."""
    out = []
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the allowlist {path}: {exc.strerror or exc}") from exc
    for line in text.splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            out.append(entry)
    return out


def is_loopback(address: str) -> bool:
    if address in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


class RateLimit:
    """At most one log line per peer every ``seconds``, counting what it held back: a peer
    that retries (zmq reconnects every 100 ms) or floods must not fill the disk.

    >>> r = RateLimit(10.0)
    >>> r.allow("a", now=0.0), r.allow("a", now=1.0), r.allow("a", now=2.0), r.allow("a", now=11.0)
    (0, None, None, 2)
    """

    def __init__(self, seconds: float = 10.0, peers: int = 1024) -> None:
        self.seconds = seconds
        self.peers = peers
        self._last: dict[str, tuple[float, int]] = {}

    def allow(self, peer: str, now: float | None = None) -> int | None:
        """None: stay quiet; else log, saying how many lines were held back since the last one."""
        now = time.monotonic() if now is None else now
        last = self._last.get(peer)
        if last is not None and now - last[0] < self.seconds:
            self._last[peer] = (last[0], last[1] + 1)
            return None
        if len(self._last) >= self.peers:  # many addresses: forget the quiet ones
            self._last = {p: v for p, v in self._last.items() if now - v[0] < self.seconds}
        self._last[peer] = (now, 0)
        return last[1] if last is not None else 0


class Connections:
    """The connections a ROUTER holds now, counted from its monitor socket: each accepted
    descriptor until it is disconnected (refused, timed out in its handshake, or closed).

    libzmq has no cap on a ROUTER's peers (ZMQ_MAX_SOCKETS counts a context's sockets, not
    their connections), so the ZAP handler refuses a connection that would exceed the cap.
    Connections whose handshake is pending count too (neither ZAP nor the monitor ties a
    handshake to its descriptor): never more than ``limit`` are admitted, and in a burst a
    few more are refused than strictly needed. Used only from the authenticator's thread,
    which owns the monitor socket."""

    def __init__(self, monitor: zmq.Socket, limit: int = MAX_CONNECTIONS) -> None:
        self.monitor = monitor
        self.limit = limit
        self.open: set[int] = set()

    def count(self) -> int:
        from zmq.utils.monitor import parse_monitor_message

        while self.monitor.poll(0):
            event = parse_monitor_message(self.monitor.recv_multipart())
            if event["event"] == zmq.EVENT_ACCEPTED:
                self.open.add(int(event["value"]))
            elif event["event"] in (zmq.EVENT_DISCONNECTED, zmq.EVENT_CLOSED):
                self.open.discard(int(event["value"]))
        return len(self.open)

    def close(self) -> None:
        self.monitor.close(0)


CONNECTION_EVENTS = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CLOSED
# The ZAP status of a refusal for want of room: a CURVE or NULL client sees it as its
# handshake's failure code (400 would read as "your key is not authorized", 300 as nothing).
FULL_STATUS = b"500"


class LoggingAuthenticator(ThreadAuthenticator):
    """zmq.auth's thread authenticator that logs refusals with the peer's address (rate-limited)
    and refuses a connection beyond the cap of :meth:`watch`."""

    refusals = RateLimit()
    connections: Connections | None = None

    def watch(self, connections: Connections) -> None:
        """Count the ROUTER's connections (``connections`` is used from the ZAP thread only)."""
        self.connections = connections

    async def handle_zap_message(self, msg: list[bytes]) -> None:
        # Frames: version, request id, domain, address, identity, mechanism, credentials...
        self._peer = printable(msg[3].decode("utf-8", "replace"), 80) if len(msg) > 3 else "?"
        self._client_key = zmq.utils.z85.encode(msg[6]).decode() if len(msg) > 6 and len(msg[6]) == 32 else ""
        held = self.connections
        if held is not None and len(msg) > 1 and held.count() > held.limit:  # this one is counted already
            self._send_zap_reply(msg[1], FULL_STATUS, f"too many connections (at most {held.limit})".encode())
            return
        await super().handle_zap_message(msg)

    def _send_zap_reply(self, request_id: bytes, status_code: bytes, status_text: bytes, user_id: str = "anonymous") -> None:
        if status_code != b"200":
            peer = getattr(self, "_peer", "?")
            held = self.refusals.allow(peer)
            if held is not None:
                key = f" client key {self._client_key}" if getattr(self, "_client_key", "") else ""
                more = f" ({held} more refusals from it not logged)" if held else ""
                log.warning("refused connection from %s: %s%s%s", peer, status_text.decode("utf-8", "replace"),
                            key, more)
        else:
            log.info("accepted connection from %s", getattr(self, "_peer", "?"))
        super()._send_zap_reply(request_id, status_code, status_text, user_id)


def _monitor(context: zmq.Context, socket: zmq.Socket) -> zmq.Socket:
    """``socket``'s monitor, its connection events never dropped: an unbounded pipe (a receive
    high-water mark of 0) where pyzmq's own keeps 1,000 events and drops the rest, which
    under a flood of connections left the count short and let connections past the cap."""
    addr = f"inproc://netesto-monitor-{id(socket):x}"
    socket.monitor(addr, CONNECTION_EVENTS)
    monitor = context.socket(zmq.PAIR)
    monitor.rcvhwm = 0
    monitor.connect(addr)
    return monitor


def secure_socket(
    context: zmq.Context,
    socket: zmq.Socket,
    *,
    keys: tuple[bytes, bytes] | None,
    authorized: str | Path | None,
    allow: list[str] | None,
    insecure: bool,
) -> LoggingAuthenticator:
    """Make ``socket`` (not yet bound) a CURVE server accepting ``authorized`` keys
    from ``allow`` addresses; or, if ``insecure``, unauthenticated (allowlist still applies)."""
    # Always an authenticator, even without CURVE: it is where connections beyond the cap are refused.
    auth = LoggingAuthenticator(context, log=logging.getLogger("netesto.agent.zap"))
    auth.start()
    if allow:
        auth.allow(*allow)
    socket.zap_domain = DOMAIN.encode()
    auth.watch(Connections(_monitor(context, socket)))
    if not insecure:
        if keys is None:
            raise UsageError("CURVE needs the agent's key pair (--keys)")
        if authorized is None or not Path(authorized).is_dir():
            raise UsageError(f"CURVE needs a directory of authorized controller public keys (--authorized), got {authorized}")
        allowed = authorized_keys(authorized)
        if not allowed:
            log.warning("no readable public keys (*.key) in %s: every controller will be refused", authorized)
        auth.configure_curve_callback(domain=DOMAIN, credentials_provider=_KeySet(allowed))
        socket.curve_publickey, socket.curve_secretkey = keys
        socket.curve_server = True
    return auth


def client_options(socket: zmq.Socket, server_key: bytes, client_keys: tuple[bytes, bytes]) -> None:
    """Configure ``socket`` as a CURVE client of the server with ``server_key``."""
    socket.curve_serverkey = server_key
    socket.curve_publickey, socket.curve_secretkey = client_keys


def describe(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = [
    "CONNECTION_EVENTS",
    "Connections",
    "FULL_STATUS",
    "LoggingAuthenticator",
    "client_options",
    "is_loopback",
    "read_allowlist",
    "secure_socket",
]
