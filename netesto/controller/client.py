"""AgentClient: one controller-side DEALER connection to a netesto-agent (zmq, msgpack, stdlib only).

One socket per client, used under a lock, so the heartbeat thread (which
renews the agent's lease while the client is open) and the caller can share
it. Pushed events arriving while we wait for a reply, or during heartbeats,
are handed to the callbacks registered with :meth:`AgentClient.on_event`.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import threading
import time
import zlib
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import zmq

from netesto.errors import (
    AgentError,
    AgentUnreachable,
    NetestoError,
    PolicyError,
    ProtocolError,
    StorageError,
    VersionMismatch,
)
from netesto.protocol.keys import load_public_key, load_secret_key
from netesto.protocol.codec import CHUNK_SIZE, DEFAULT_MAX_MESSAGE, encode_request, from_wire, reply_result, unpack
from netesto.protocol.messages import ErrorInfo, Event, Reply

log = logging.getLogger("netesto.controller.client")
EventCallback = Callable[[Event], None]
_HANDSHAKE_EVENTS = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                     | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
FETCH_WINDOW = 4  # chunk requests in flight: hides the round trip behind the transfer


def _load_pair(keys: str | Path | tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    return keys if isinstance(keys, tuple) else load_secret_key(keys)


class AgentClient:
    """Talks to one agent. Methods block until the reply (or ``timeout`` -> AgentUnreachable)."""

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
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._stash: dict[int, Reply] = {}
        self._callbacks: list[EventCallback] = []
        self._last_request = 0.0
        self._closed = False
        self._socket: zmq.Socket | None = None
        self._auth_failure: str | None = None
        self._connect()
        self.lease: float | None = None
        self._heartbeat = heartbeat
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        if heartbeat > 0:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"netesto-heartbeat-{name}", daemon=True)
            self._hb_thread.start()

    # ---- plumbing
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
            event = zmq.Event(int.from_bytes(self._monitor.recv_multipart()[0][:2], "little"))
            if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self._auth_failure = (f"{self.address}:{self.port} refused our CURVE key: the controller's public "
                                      "key is not among the agent's authorized keys (or our address is not allowed)")
            elif event in (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                self._auth_failure = (f"CURVE handshake with {self.address}:{self.port} failed: the agent's public "
                                      "key in the lab file does not match the agent's key (or it is not a netesto-agent)")
        if self._auth_failure is not None:
            raise AgentError(self._auth_failure, host=self.name, kind="AuthFailed")

    def _reset(self) -> None:
        """Drop the socket (and anything queued on it) after a timeout."""
        self._close_socket()
        self._stash.clear()
        self._connect()

    def _unreachable(self, what: str, timeout: float) -> AgentUnreachable:
        return AgentUnreachable(f"no answer to {what} within {timeout:g} s from {self.address}:{self.port} "
                                "(agent down, wrong key, or address not allowed?)", host=self.name)

    def _send(self, type: str, args: Mapping[str, Any], deadline: float) -> int:
        assert self._socket is not None
        rid = next(self._ids)
        data = encode_request(rid, type, dict(args))
        while True:
            try:
                self._socket.send(data, zmq.NOBLOCK)
                break
            except zmq.Again:
                self._check_handshake()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._unreachable(type, self.timeout) from None
                self._socket.poll(int(min(left, 0.1) * 1000) + 1, zmq.POLLOUT)
        self._last_request = time.monotonic()
        return rid

    def _receive(self, rid: int, what: str, deadline: float) -> Reply:
        """The reply to ``rid`` (events and other replies met on the way are dispatched or stashed)."""
        while True:
            ok, result = self._receive_result(rid, what, deadline)
            if ok:
                return Reply(rid, True, result)
            if rid in self._stash:
                return self._stash.pop(rid)

    def _receive_result(self, rid: int, what: str, deadline: float) -> tuple[bool, Any]:
        """``(True, result)`` for a successful reply to ``rid`` (the common case, no message
        objects built); ``(False, None)`` once any reply to ``rid`` was stashed instead."""
        assert self._socket is not None
        while True:
            if rid in self._stash:
                return False, None
            left = deadline - time.monotonic()
            if left <= 0:
                self._reset()
                raise self._unreachable(what, self.timeout)
            # A blocking recv with a receive timeout: cheaper than poll() + recv().
            ms = max(1, int(left * 1000))
            if ms != self._rcvtimeo:
                self._socket.rcvtimeo = self._rcvtimeo = ms
            try:
                data = self._socket.recv()
            except zmq.Again:
                continue
            try:
                obj = unpack(data, max_size=self.max_message)
            except ProtocolError as exc:
                log.warning("%s: dropped a bad message: %s", self.where, exc)
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
            log.warning("%s: dropped a bad message: %s", self.where, exc)
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

    def _result(self, reply: Reply, what: str) -> Any:
        if reply.ok:
            return reply.result
        err = reply.error or ErrorInfo("AgentError", "unknown error")
        raise self._error(err, what)

    def _error(self, err: ErrorInfo, what: str) -> NetestoError:
        if err.type == "VersionMismatch":
            d = err.detail if isinstance(err.detail, dict) else {}
            # The agent's "ours" is its own version, "theirs" ours.
            return VersionMismatch(str(d.get("theirs", "?")), str(d.get("ours", "?")), host=self.where)
        cls = PolicyError if err.type == "PolicyError" else AgentError
        return cls(f"{what}: {err.message}", host=self.name, kind=err.type, detail=err.detail)

    def request(self, type: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        """Send one request and return its result (or raise the agent's error)."""
        if self._closed:
            raise AgentError("client is closed", host=self.name)
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            deadline = time.monotonic() + timeout
            rid = self._send(type, args or {}, deadline)
            ok, result = self._receive_result(rid, type, deadline)
            return result if ok else self._result(self._stash.pop(rid), type)

    def _heartbeat_loop(self) -> None:
        # Tick often and compare with the current period: hello() may learn a
        # lease shorter than the period this thread started with.
        while not self._hb_stop.wait(0.1):
            period = min(self._heartbeat, (self.lease or 1e9) / 3)
            if time.monotonic() - self._last_request < period:
                continue
            try:
                self.request("heartbeat")
            except NetestoError as exc:
                log.debug("%s: heartbeat failed: %s", self.where, exc)

    # ---- public API
    def on_event(self, callback: EventCallback) -> None:
        """Call ``callback(event)`` for each pushed event (``event.event``, ``event.data``;
        ``data["agent"]`` is this client's name). Runs in the thread that is talking to the agent."""
        self._callbacks.append(callback)

    def _malformed(self, what: str, problem: str) -> ProtocolError:
        return ProtocolError(f"{self.where}: malformed {what} reply: {problem}")

    def _map(self, result: Any, what: str) -> dict[str, Any]:
        if not isinstance(result, dict):
            raise self._malformed(what, f"expected a map, got {type(result).__name__}")
        return result

    def _number(self, result: dict[str, Any], key: str, what: str, *, optional: bool = False) -> float:
        value = result.get(key)
        if value is None and optional:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._malformed(what, f"{key}={value!r} is not a number")
        return float(value)

    def hello(self) -> dict[str, Any]:
        result = self._map(self.request("hello"), "hello")
        self.lease = self._number(result, "lease", "hello", optional=True) or None
        return result

    def poll_events(self, timeout: float = 0.0) -> None:
        """Deliver pushed events that arrived while no request was in flight."""
        with self._lock:
            assert self._socket is not None
            end = time.monotonic() + timeout
            while self._socket.poll(int(max(0.0, end - time.monotonic()) * 1000), zmq.POLLIN):
                try:
                    obj = unpack(self._socket.recv(), max_size=self.max_message)
                except ProtocolError as exc:
                    log.warning("%s: dropped a bad message: %s", self.where, exc)
                    continue
                self._take(obj)

    def clock_offset(self, samples: int = 8) -> tuple[float, float]:
        """``(agent_time - our_time, rtt)`` from the lowest-RTT of ``samples`` round trips."""
        best: tuple[float, float] | None = None
        for _ in range(max(1, samples)):
            t0 = time.time()
            agent_time = self._number(self._map(self.request("time"), "time"), "time", "time")
            t1 = time.time()
            rtt = t1 - t0
            if best is None or rtt < best[1]:
                best = (agent_time - (t0 + t1) / 2, rtt)
        assert best is not None
        return best

    def snapshot(self, exp: int | str, order: int, host: str | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"exp": exp, "order": order}
        if host:
            args["host"] = host
        return self.request("snapshot", args, timeout=max(self.timeout, 30.0))

    def prepare_server(self, exp: int | str, token: str = "", *, driver: str = "builtin",
                       ports: Sequence[int] | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"exp": exp, "token": token, "driver": driver}
        if ports:
            args["ports"] = list(ports)
        return self.request("prepare_server", args, timeout=max(self.timeout, 15.0))

    def start_flows(self, exp: int | str, specs: Iterable[Any], at: float | None = None, *, ping: bool = False,
                    ping_interval: float = 0.2) -> dict[str, Any]:
        """Start flows (FlowSpecs or their dicts); ``at`` is the start time in the AGENT's clock."""
        dicts = [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in specs]
        return self.request("start_flows", {"exp": exp, "specs": dicts, "at": at, "ping": ping,
                                            "ping_interval": ping_interval})

    def ping_start(self, exp: int | str, target: str, name: str | None = None, *, interval: float = 0.2,
                   duration: float = 10.0) -> dict[str, Any]:
        return self.request("ping_start", {"exp": exp, "target": target, "name": name or target,
                                           "interval": interval, "duration": duration})

    def claim(self, run: str, controller: str) -> dict[str, Any]:
        """Own the agent for run ``run`` (AgentError kind "Busy" naming the owner if another run does)."""
        return self.request("claim", {"run": run, "controller": controller})

    def release(self) -> dict[str, Any]:
        return self.request("release", {})

    def status(self, exp: int | str) -> dict[str, Any]:
        return self.request("status", {"exp": exp})

    def wait_flows(self, exp: int | str, timeout: float, *, poll: float = 0.2) -> dict[str, Any]:
        """Poll status until the experiment's flows ended (``complete`` True) or ``timeout`` passed.

        On a server host this waits for the server ends (``server_running``) too,
        so a fetch afterwards does not race the engine's last writes."""
        end = time.monotonic() + timeout
        while True:
            st = self.status(exp)
            if st.get("finished") and not st.get("running") and not st.get("server_running"):
                return {**st, "complete": True}
            if time.monotonic() >= end:
                return {**st, "complete": False}
            time.sleep(min(poll, max(0.0, end - time.monotonic())))

    def stop(self, exp: int | str | None = None) -> dict[str, Any]:
        return self.request("stop", {"exp": exp} if exp is not None else {})

    def set_sysctl(self, settings: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
        """``{"net.ipv4.tcp_wmem": "4096 32768 8388608"}`` or ``[(name, values)]``."""
        items = settings.items() if isinstance(settings, Mapping) else settings
        wire = {str(k): (list(v) if isinstance(v, (list, tuple)) else str(v)) for k, v in items}
        return self.request("set_sysctl", {"settings": wire})

    def set_module_params(self, module: str, params: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
        items = params.items() if isinstance(params, Mapping) else params
        return self.request("set_module_params", {"module": module, "params": {str(k): str(v) for k, v in items}})

    def set_qdisc(self, dev: str, qdisc: str, action: str = "", rate: str = "", burst: str = "", limit: str = "",
                  other: str = "") -> dict[str, Any]:
        return self.request("set_qdisc", {"dev": dev, "qdisc": qdisc, "action": action, "rate": str(rate),
                                          "burst": str(burst), "limit": str(limit), "other": other})

    def set_netem(self, dev: str, delay: float, jitter: float = 0.0, loss: float = 0.0, rate: int = 0,
                  limit: int = 1000) -> dict[str, Any]:
        return self.request("set_netem", {"dev": dev, "delay": delay, "jitter": jitter, "loss": loss,
                                          "rate": int(rate), "limit": int(limit)})

    def tcpdump_start(self, exp: int | str, dev: str = "", server: str = "X", packets: int = 10000) -> dict[str, Any]:
        return self.request("tcpdump_start", {"exp": exp, "dev": dev, "server": server, "packets": packets})

    def tcpdump_stop(self, exp: int | str | None = None) -> dict[str, Any]:
        return self.request("tcpdump_stop", {"exp": exp} if exp is not None else {})

    def restore(self) -> dict[str, Any]:
        return self.request("restore")

    def fetch(self, exp: int | str, dest_dir: str | Path, *, ack: bool = True) -> list[Path]:
        """Copy every file of ``<agent datadir>/<exp>/`` into ``dest_dir`` (same relative paths).

        Chunks are checked against their crc32 and each file against its whole
        digest; files are written to ``.part`` and renamed, and an interrupted
        fetch resumes from the ``.part`` length. The agent deletes its copy only
        after ``ack`` (sent once everything is on our disk).
        """
        listing = self._map(self.request("fetch_list", {"exp": exp}), "fetch_list")
        files = listing.get("files")
        if not isinstance(files, list):
            raise self._malformed("fetch_list", f"files={files!r:.80} is not a list")
        for entry in files:  # all checked before anything is written
            if (not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or "\0" in entry["path"]
                    or type(entry.get("size")) is not int or entry["size"] < 0
                    or not isinstance(entry.get("sha256"), str)):
                raise self._malformed("fetch_list", f"bad file entry {entry!r:.200} (expected path, size, sha256)")
        chunk = listing.get("chunk") or CHUNK_SIZE
        if type(chunk) is not int or chunk <= 0:
            raise self._malformed("fetch_list", f"chunk={chunk!r} is not a positive integer")
        dest = Path(dest_dir)
        out = []
        for entry in files:
            try:
                out.append(self._fetch_file(exp, entry, dest, chunk))
            except OSError as exc:  # our disk, not the agent: it keeps the file (nothing acknowledged)
                raise StorageError(f"cannot store {entry.get('path', '?')} of experiment {exp} from {self.name} "
                                   f"in {dest}: {exc.strerror or exc}; the agent keeps it (fetch it with "
                                   "'netesto run --collect' into a directory with room)") from exc
        if ack:
            if listing.get("flows_running"):
                log.warning("%s: exp %s still has running flows; not acknowledging", self.where, exp)
            else:
                self.request("ack", {"exp": exp})
        return out

    def _fetch_file(self, exp: int | str, entry: Mapping[str, Any], dest: Path, chunk: int) -> Path:
        rel = str(entry["path"])
        target = (dest / rel).resolve()
        if dest.resolve() not in target.parents:
            raise ProtocolError(f"{self.where}: refusing file path {rel!r} outside {dest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        size, want = int(entry["size"]), str(entry["sha256"])
        whole = hashlib.sha256()
        offset = 0
        if part.exists() and part.stat().st_size <= size:
            with open(part, "rb") as f:  # resume: the prefix we have counts toward the digest
                while block := f.read(1 << 20):
                    whole.update(block)
            offset = part.stat().st_size
        with open(part, "r+b" if offset else "wb") as f:
            f.seek(offset)
            retries = 0
            while offset < size:
                with self._lock:
                    deadline = time.monotonic() + max(self.timeout, 10.0)
                    pending: deque[tuple[int, int]] = deque()
                    nxt = offset
                    bad = False
                    while (pending or nxt < size) and not bad:
                        while nxt < size and len(pending) < FETCH_WINDOW:
                            want_len = min(chunk, size - nxt)  # never past the listed size (a growing file)
                            rid = self._send("fetch_chunk", {"exp": exp, "path": rel, "offset": nxt, "length": want_len},
                                             deadline)
                            pending.append((rid, nxt))
                            nxt += chunk
                        rid, at = pending.popleft()
                        got = self._result(self._receive(rid, "fetch_chunk", deadline), f"fetch {rel}")
                        if (not isinstance(got, dict) or not isinstance(got.get("data"), bytes)
                                or type(got.get("crc32")) is not int or type(got.get("offset")) is not int):
                            raise self._malformed("fetch_chunk", f"{rel} at {at}: expected data (bytes), crc32 "
                                                  f"and offset, got {got!r:.200}")
                        data = got["data"]
                        if not data:
                            raise ProtocolError(f"{self.where}: {rel} ended at {at} bytes, expected {size}")
                        # A short chunk (file changed under us) would misplace the pipelined
                        # ones after it: treat it like a damaged one and re-request from here.
                        if (zlib.crc32(data) != got["crc32"] or got["offset"] != at
                                or len(data) != min(chunk, size - at)):
                            bad = True
                            break
                        f.write(data)
                        whole.update(data)
                        offset = at + len(data)
                        deadline = time.monotonic() + max(self.timeout, 10.0)
                    for rid, _ in pending:  # the window after a bad chunk: collect and drop
                        try:
                            self._receive(rid, "fetch_chunk", deadline)
                        except NetestoError:
                            break
                if bad:
                    retries += 1
                    log.warning("%s: chunk of %s at %d failed its checksum (try %d)", self.where, rel, offset, retries)
                    if retries >= 3:
                        raise ProtocolError(f"{self.where}: chunk of {rel} at offset {offset} failed its crc32 check "
                                            f"{retries} times; the agent keeps the data (not acknowledged)")
                    f.seek(offset)
                    f.truncate()
            f.flush()
            os.fsync(f.fileno())
        if whole.hexdigest() != want:
            part.unlink()
            raise ProtocolError(f"{self.where}: {rel} failed its whole-file sha256 check; the agent keeps the data")
        os.replace(part, target)
        return target

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._hb_stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=2 * self.timeout)
        with self._lock:
            self._close_socket()

    def __enter__(self) -> "AgentClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AgentClient({self.name!r}, {self.address!r}, {self.port})"


__all__ = ["AgentClient", "EventCallback"]
