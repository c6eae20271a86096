"""The commands that act on hosts: DO_SERVER, DO_CLIENT, GET_DATA, SET_SYSCTL,
SET_MODULE_PARAMS, SET_NETEM, SET_QDISC, DO_TCPDUMP, PROCESS_EXP, and the
experiment/host bookkeeping they share (``exp=``, ``host=``, ``expName=``).

A mixin of :class:`netesto.script.interp.Interpreter`, kept apart so that the
interpreter's own module is the language (variables, FOR, IF, macros) and this
one is what the language asks of a lab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, TypeVar, cast

from netesto.errors import ScriptError
from netesto.policy import MAX_EXP, MAX_FLOW_SECONDS, qdisc_other_words
from netesto.script import validate as V
from netesto.script.actions import (
    Action,
    DoClient,
    DoServer,
    DoTcpdump,
    GetData,
    Location,
    ProcessExp,
    SetModuleParams,
    SetNetem,
    SetQdisc,
    SetSysctl,
)
from netesto.script.frame import Frame as _Frame
from netesto.script.lexer import Line, Token
from netesto.script.parser import Command, suggest
from netesto.script.store import Counter
from netesto.vocab import DRIVERS, TEST_TYPES

COMMON = ("exp", "host", "expName")
MAX_SECONDS = 7 * 86400.0  # longest WAIT, dur or delay accepted
# The arguments each command takes (the original's names).
ARGS: dict[str, tuple[str, ...]] = {
    "DO_SERVER": COMMON + ("order", "start"),
    "DO_CLIENT": COMMON + (
        "server", "ca", "dur", "delay", "instances", "req", "reply", "stats",
        "localBuffer", "remoteBuffer", "test", "group", "driver", "pacing", "rate", "interval",
    ),
    "GET_DATA": COMMON,
    "SET_NETEM": COMMON + ("netem_delay", "delay", "limit", "loss", "jitter", "rate"),
    "SET_QDISC": COMMON + ("qdisc", "action", "rate", "burst", "limit", "other"),
    "DO_TCPDUMP": COMMON + ("server", "packets"),
    "PROCESS_EXP": ("exp", "expName"),
    "CLOSE": ("host",),
    "EXIT": ("host",),
}
_STREAM_REQ = frozenset({"S", "s", "STREAM", "stream"})
_TCP_STREAMS = frozenset({"TCP_STREAM", "TCP_MAERTS", "TCP_BIDIR"})
_MISSING = object()
_T = TypeVar("_T")


class RemoteCommands:
    """Builders of the actions that go to agents (mixed into the Interpreter)."""

    # The interpreter's state these commands read and move on.
    counter: Counter
    host_suffix: str
    last_host: str
    last_exp: int | None
    last_exp_name: str
    desc: str
    other: tuple[tuple[str, str], ...]
    _group_exp: int | None
    _group_next: int
    _fetched: set[tuple[str, int]]
    _pairs: dict[tuple[int, str, str, int], str]
    _value_cache: dict[tuple[str, str, str], object]

    if TYPE_CHECKING:
        def _err(self, frame: _Frame, line: Line, col: int, message: str, hint: str = "") -> ScriptError: ...
        def _loc(self, node: Command, frame: _Frame) -> Location: ...
        def _undefined(self, value: str, frame: _Frame, line: Line, col: int) -> None: ...
        def _kv(self, node: Command, frame: _Frame, name: str,
                allowed: tuple[str, ...] | None) -> dict[str, tuple[str, Token]]: ...
        def _value(self, frame: _Frame, node: Command, name: str, key: str, raw: str,
                   tok: Token, conv: Callable[[str], _T]) -> _T: ...

    def _exp(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]],
             *, consume: bool = True) -> int:
        if "exp" in args:
            raw, tok = args["exp"]
            self._undefined(raw, frame, node.line, tok.col)
            if raw in ("COUNTER", "counter"):
                value = self._counter_take(frame, node, tok.col)
            elif raw in ("PREV", "prev"):
                if self.last_exp is None:
                    raise self._err(frame, node.line, tok.col,
                                    "exp=PREV but there is no previous experiment",
                                    "use exp=COUNTER for the first command of an experiment")
                value = self.last_exp
            else:
                value = self._value(frame, node, node.name, "exp", raw, tok,
                                    lambda s: V.to_int(s, low=0, high=MAX_EXP))
        elif self.last_exp is not None:
            value = self.last_exp
        elif consume:
            value = self._counter_take(frame, node, node.col)
        else:
            return 0
        self.last_exp = value
        return value

    def _counter_take(self, frame: _Frame, node: Command, col: int) -> int:
        value = self.counter.take()
        if not 0 <= value <= MAX_EXP:
            raise self._err(frame, node.line, col,
                            f"{node.name}: experiment number {value} from the counter is not in 0..{MAX_EXP}",
                            "reset the counter file (or give exp=N)")
        return value

    def _qualify(self, host: str) -> str:
        if self.host_suffix and "." not in host and ":" not in host:
            return f"{host}.{self.host_suffix}"
        return host

    def _host(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]],
              key: str = "host") -> str:
        if key in args:
            raw, tok = args[key]
            self._value(frame, node, node.name, key, raw, tok, lambda s: V.word(s, "host name"))
            host = self._qualify(raw)
            self.last_host = host
            return host
        if not self.last_host:
            raise self._err(frame, node.line, node.col, f"{node.name}: host= is required",
                            "no earlier command named a host")
        return self.last_host

    def _exp_name(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]]) -> str:
        if "expName" in args:
            raw, tok = args["expName"]
            self._value(frame, node, node.name, "expName", raw, tok,
                        lambda s: V.name(s, "expName"))
            self.last_exp_name = raw
        return self.last_exp_name

    def _get(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]],
             key: str, default: str, conv: Callable[[str], _T]) -> _T:
        if key not in args:
            cache_key = (node.name, key, default)
            if cache_key not in self._value_cache:
                self._value_cache[cache_key] = conv(default)
            return cast(_T, self._value_cache[cache_key])
        raw, tok = args[key]
        # Conversions of a given (command, argument, text) never change: cache them.
        cache_key = (node.name, key, raw)
        value = self._value_cache.get(cache_key, _MISSING)
        if value is _MISSING:
            value = self._value(frame, node, node.name, key, raw, tok, conv)
            if len(self._value_cache) > 20_000:
                self._value_cache.clear()
            self._value_cache[cache_key] = value
        return cast(_T, value)

    def _remote_common(self, node: Command, frame: _Frame, *, consume: bool = True,
                       open_args: bool = False) -> tuple[dict[str, tuple[str, Token]], str, int, str]:
        """The arguments, host, exp and expName of a command run on a host.
        ``open_args``: any key is accepted (sysctl names, module parameters)."""
        args = self._kv(node, frame, node.name, None if open_args else ARGS[node.name])
        common = {k: v for k, v in args.items() if k in COMMON} if open_args else args
        host = self._host(frame, node, common)
        exp = self._exp(frame, node, common, consume=consume)
        exp_name = self._exp_name(frame, node, common)
        return args, host, exp, exp_name

    def _do_server(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        order = self._get(frame, node, args, "order", "0", lambda s: V.to_int(s, low=0, high=1))
        start = self._get(frame, node, args, "start", "0", lambda s: V.to_int(s, low=0, high=1))
        self._fetched.clear()
        yield DoServer(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                       order=order, start=start)

    def _do_client(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        if "server" not in args:
            raise self._err(frame, node.line, node.col, "DO_CLIENT: server= is required",
                            "e.g. DO_CLIENT host=h1 server=h2 test=TCP_STREAM")
        server = self._host(frame, node, {"server": args["server"]}, "server")
        self.last_host = host  # server= does not change the default host
        g = lambda k, d, c: self._get(frame, node, args, k, d, c)  # noqa: E731
        ca = g("ca", "reno", lambda s: V.name(s, "congestion control"))
        dur = g("dur", "20", lambda s: V.to_float(s, low=0.001, high=MAX_FLOW_SECONDS))
        delay = g("delay", "0", lambda s: V.to_float(s, low=0, high=MAX_SECONDS))
        instances = g("instances", "1", lambda s: V.to_int(s, low=1, high=10000))
        test_raw, test_tok = args.get("test", ("TCP_RR", None))
        self._undefined(test_raw, frame, node.line, test_tok.col if test_tok else node.col)
        test = test_raw.upper()
        if test not in TEST_TYPES:
            raise self._err(frame, node.line, test_tok.col if test_tok else node.col,
                            f"DO_CLIENT: unknown test {test_raw!r}",
                            suggest(test, TEST_TYPES) or "tests: " + ", ".join(TEST_TYPES))
        req_raw = args["req"][0] if "req" in args else "1M"
        if test == "TCP_RR" and req_raw in _STREAM_REQ:
            test = "TCP_STREAM"
        if test in _TCP_STREAMS:
            req, req_text = 0, "S"
            if "req" in args and req_raw not in _STREAM_REQ:
                g("req", "1M", V.to_size)  # still validated
        elif test == "UDP_STREAM":
            req = g("req", "1472", V.to_size)
            req_text = req_raw if "req" in args else "1472"
            if not 1 <= req <= 65507:
                raise self._err(frame, node.line, args["req"][1].col if "req" in args else node.col,
                                f"DO_CLIENT: UDP datagram size {req} is not in 1..65507")
        else:
            req = g("req", "1M", V.to_size)
            req_text = req_raw
        reply = g("reply", "1", V.to_size)
        stats = g("stats", "0", lambda s: V.to_int(s, low=0, high=1))
        local_buffer = g("localBuffer", "0", V.to_size)
        remote_buffer = g("remoteBuffer", "0", V.to_size)
        group = g("group", "0", lambda s: V.to_int(s, low=0))
        driver = g("driver", "builtin", lambda s: s)
        if driver not in DRIVERS:
            raw, tok = args["driver"]
            raise self._err(frame, node.line, tok.col, f"DO_CLIENT: unknown driver {raw!r}",
                            suggest(raw, DRIVERS) or "drivers: " + ", ".join(DRIVERS))
        pacing = g("pacing", "0", V.to_bits)
        rate = g("rate", "0", V.to_bits)
        interval = g("interval", "0.01", lambda s: V.to_float(s, low=0.001, high=60))
        if group == 0:
            if self._group_exp != exp:
                self._group_exp, self._group_next = exp, 1
            group = self._group_next
            self._group_next += 1
        # Flow ids are <client>-<server>-<group>-<instance>: a second DO_CLIENT with the
        # same ones would replace the first one's flows and data.
        pair = (exp, host, server, group)
        first = self._pairs.get(pair)
        if first is not None:
            raise self._err(frame, node.line, node.col,
                            f"DO_CLIENT: flows {host}-{server}-{group}-* are already in experiment {exp} "
                            f"(from {first})", "give one of them another group=N")
        self._pairs[pair] = f"{node.line.file}:{node.line.lineno}"
        self._fetched.clear()
        yield DoClient(
            loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name, server=server,
            ca=ca, dur=dur, delay=delay, instances=instances, req=req, req_text=req_text,
            reply=reply, stats=stats, local_buffer=local_buffer, remote_buffer=remote_buffer,
            test=test, group=group, driver=driver, pacing=pacing, rate=rate,
            interval=interval,
        )

    def _get_data(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        if (host, exp) in self._fetched:
            return  # the original skips a repeated GET_DATA until the next DO_*
        self._fetched.add((host, exp))
        yield GetData(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name)

    def _set_sysctl(self, node: Command, frame: _Frame) -> Iterator[Action]:
        kv, host, exp, exp_name = self._remote_common(node, frame, consume=False, open_args=True)
        settings: list[tuple[str, tuple[str, ...]]] = []
        for key, (raw, tok) in kv.items():
            if key in COMMON:
                continue
            self._undefined(raw, frame, node.line, tok.col)
            try:
                settings.append(V.sysctl_setting(key, raw))
            except KeyError:
                allowed = sorted(V.SYSCTLS)
                hint = suggest(key, allowed)
                raise self._err(frame, node.line, tok.col, f"SET_SYSCTL: sysctl {key!r} is not allowed",
                                (hint + " " if hint else "") + "allowed: " + ", ".join(allowed)) from None
            except ValueError as exc:
                raise self._err(frame, node.line, tok.col, f"SET_SYSCTL: {exc}") from None
        if not settings:
            raise self._err(frame, node.line, node.col, "SET_SYSCTL: no sysctl=value given",
                            "e.g. SET_SYSCTL host=h1 net.ipv4.tcp_ecn=1")
        yield SetSysctl(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                        settings=tuple(settings))

    def _set_module_params(self, node: Command, frame: _Frame) -> Iterator[Action]:
        kv, host, exp, exp_name = self._remote_common(node, frame, consume=False, open_args=True)
        if "module" not in kv:
            raise self._err(frame, node.line, node.col, "SET_MODULE_PARAMS: module= is required",
                            "modules: " + ", ".join(sorted(V.MODULE_PARAMS)))
        module, mtok = kv["module"]
        if module not in V.MODULE_PARAMS:
            hint = suggest(module, list(V.MODULE_PARAMS))
            raise self._err(frame, node.line, mtok.col,
                            f"SET_MODULE_PARAMS: module {module!r} is not allowed",
                            (hint + " " if hint else "") + "modules: " + ", ".join(sorted(V.MODULE_PARAMS)))
        allowed = V.MODULE_PARAMS[module]
        params: list[tuple[str, str]] = []
        for key, (raw, tok) in kv.items():
            if key in COMMON or key == "module":
                continue
            if key not in allowed:
                hint = suggest(key, allowed)
                raise self._err(frame, node.line, tok.col,
                                f"SET_MODULE_PARAMS: {module} parameter {key!r} is not allowed",
                                (hint + " " if hint else "") + "allowed: " + ", ".join(allowed))
            self._value(frame, node, node.name, key, raw, tok, lambda s: V.word(s, "value"))
            params.append((key, raw))
        if not params:
            raise self._err(frame, node.line, node.col, "SET_MODULE_PARAMS: no parameter given",
                            f"{module} parameters: " + ", ".join(allowed))
        yield SetModuleParams(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                              module=module, params=tuple(params))

    def _set_netem(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame, consume=False)
        if "netem_delay" not in args and "delay" not in args:
            raise self._err(frame, node.line, node.col, "SET_NETEM: netem_delay= is required",
                            "delay in ms; netem_delay=0 removes netem")
        if "netem_delay" in args and "delay" in args:
            raise self._err(frame, node.line, args["delay"][1].col,
                            "SET_NETEM: give netem_delay= or delay=, not both")
        key = "netem_delay" if "netem_delay" in args else "delay"
        g = lambda k, d, c: self._get(frame, node, args, k, d, c)  # noqa: E731
        delay = g(key, "0", lambda s: V.to_float(s, low=0, high=60000))
        yield SetNetem(
            loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name, delay=delay,
            limit=g("limit", "1000", lambda s: V.to_int(s, low=1, high=10**7)),
            loss=g("loss", "0", lambda s: V.to_float(s, low=0, high=100)),
            jitter=g("jitter", "0", lambda s: V.to_float(s, low=0, high=60000)),
            rate=g("rate", "0", V.to_bits),
        )

    def _set_qdisc(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame, consume=False)
        if "qdisc" not in args:
            raise self._err(frame, node.line, node.col, "SET_QDISC: qdisc= is required",
                            "qdiscs: " + ", ".join(V.QDISCS))
        qraw, qtok = args["qdisc"]
        self._undefined(qraw, frame, node.line, qtok.col)
        if qraw not in V.QDISCS:
            hint = suggest(qraw, V.QDISCS)
            raise self._err(frame, node.line, qtok.col, f"SET_QDISC: unknown qdisc {qraw!r}",
                            (hint + " " if hint else "") + "qdiscs: " + ", ".join(V.QDISCS))
        g = lambda k, d, c: self._get(frame, node, args, k, d, c)  # noqa: E731

        def action_ok(s: str) -> str:
            if s not in V.QDISC_ACTIONS:
                raise ValueError(f"expected one of add, change, replace, del; got {s!r}")
            return s

        def other_ok(s: str) -> str:
            return " ".join(qdisc_other_words(s))  # "mpu,64" -> the tc words "mpu 64", as the agent takes them

        yield SetQdisc(
            loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name, qdisc=qraw,
            action=g("action", "", action_ok),
            rate=g("rate", "", lambda s: V.tc_rate(s) if s else ""),
            burst=g("burst", "", lambda s: V.tc_size(s, "burst") if s else ""),
            limit=g("limit", "", lambda s: V.tc_size(s, "limit") if s else ""),
            other=g("other", "", other_ok),
        )

    def _do_tcpdump(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        if "server" not in args:
            raise self._err(frame, node.line, node.col, "DO_TCPDUMP: server= is required",
                            "server=X captures without a host filter")
        raw, tok = args["server"]
        self._value(frame, node, node.name, "server", raw, tok, lambda s: V.word(s, "server"))
        server = raw if raw in ("X", "x") else self._qualify(raw)  # X: no host filter (runner: X or x)
        packets = self._get(frame, node, args, "packets", "10000",
                            lambda s: V.to_int(s, low=1, high=10**8))
        yield DoTcpdump(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                        server=server, packets=packets)

    def _process_exp(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args = self._kv(node, frame, node.name, ARGS[node.name])
        if "exp" not in args and self.last_exp is None:
            raise self._err(frame, node.line, node.col, "PROCESS_EXP: no experiment to process",
                            "run DO_SERVER/DO_CLIENT first or give exp=N")
        exp = self._exp(frame, node, args)
        self._exp_name(frame, node, args)
        self._group_exp, self._group_next = exp, 1
        yield ProcessExp(loc=self._loc(node, frame), exp=exp, desc=self.desc, other=self.other)


__all__ = ["ARGS", "COMMON", "MAX_SECONDS", "RemoteCommands"]
