"""The builders of the commands that act on hosts: DO_SERVER, DO_CLIENT, GET_DATA,
SET_SYSCTL, SET_MODULE_PARAMS, SET_NETEM, SET_QDISC, SET_LINK (:mod:`~netesto.script.linkcmd`),
DO_TCPDUMP, DO_TRACE, DO_WATCH, PROCESS_EXP, CLOSE and EXIT.

One function per command turns its located arguments (:class:`Args`) into the
Action the controller runs, checking every value against the policy the agent
enforces; the experiment/host bookkeeping they share (``exp=``, ``host=``,
``expName=``) is the :class:`~netesto.script.book.Book`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Callable, Iterator

from netesto.policy import MAX_FLOW_SECONDS, qdisc_other_words
from netesto.protocol.flowspec import CRR_CLOSES
from netesto.script import validate as V
from netesto.script.actions import (
    Action,
    DoClient,
    DoServer,
    DoTcpdump,
    DoTrace,
    DoWatch,
    GetData,
    ProcessExp,
    SetModuleParams,
    SetNetem,
    SetQdisc,
    SetSysctl,
)
from netesto.script import linkcmd
from netesto.script.book import COMMON, Book
from netesto.script.located import Args
from netesto.script.parser import suggest
from netesto.script.workload import workload_args
from netesto.vocab import DRIVERS, STREAM_TESTS, TEST_TYPES

MAX_SECONDS = 7 * 86400.0  # longest WAIT, dur or delay accepted
_CGROUP = re.compile(r"^[A-Za-z0-9_.@:/-]{1,255}$")
# The arguments each command takes (the original's names); None: any (sysctl names, module parameters).
ARGS: dict[str, tuple[str, ...] | None] = {
    "DO_SERVER": COMMON + ("order", "start"),
    "DO_CLIENT": COMMON + (
        "server", "ca", "dur", "delay", "instances", "req", "reply", "stats",
        "localBuffer", "remoteBuffer", "test", "group", "driver", "pacing", "rate", "interval",
        "crr_close", "trace", "gap", "arrivals", "load", "bottleneck", "seed",
    ),
    "GET_DATA": COMMON,
    "SET_SYSCTL": None,
    "SET_MODULE_PARAMS": None,
    "SET_NETEM": COMMON + ("netem_delay", "delay", "limit", "loss", "jitter", "rate"),
    "SET_QDISC": COMMON + ("qdisc", "action", "rate", "burst", "limit", "other"),
    "SET_LINK": linkcmd.ARGS,
    "DO_TCPDUMP": COMMON + ("server", "packets"),
    "DO_TRACE": COMMON + ("buffer",),
    "DO_WATCH": COMMON + ("name", "port", "lport", "rport", "addr", "cgroup", "pid", "interval"),
    "PROCESS_EXP": ("exp", "expName"),
    "CLOSE": ("host",),
    "EXIT": ("host",),
}
_STREAM_REQ = frozenset({"S", "s", "STREAM", "stream"})
TRACE_ENDS = ("client", "server", "both", "none")
_TCP_STREAMS = STREAM_TESTS - {"UDP_STREAM"}


def do_server(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args)
    order = args.get("order", "0", lambda s: V.to_int(s, low=0, high=1))
    start = args.get("start", "0", lambda s: V.to_int(s, low=0, high=1))
    book.fetched.clear()
    yield DoServer(loc=args.loc, host=host, exp=exp, exp_name=exp_name, order=order, start=start)


def _test(args: Args) -> str:
    """``test=`` (default TCP_RR), upper-cased; ``test=TCP_RR req=S`` is TCP_STREAM."""
    raw = args.defined("test") if "test" in args else "TCP_RR"
    test = raw.upper()
    if test not in TEST_TYPES:
        raise args.error_at("test", f"DO_CLIENT: unknown test {raw!r}",
                            suggest(test, TEST_TYPES) or "tests: " + ", ".join(TEST_TYPES))
    if test == "TCP_RR" and "req" in args and args.raw("req") in _STREAM_REQ:
        return "TCP_STREAM"
    return test


def _request(args: Args, test: str) -> tuple[int, str]:
    """``req=`` in bytes and as written: 0 and ``S`` for TCP streams, the datagram for UDP_STREAM."""
    req_raw = args.raw("req") if "req" in args else "1M"
    if test in _TCP_STREAMS:
        if "req" in args and req_raw not in _STREAM_REQ:
            args.get("req", "1M", V.to_size)  # still validated
        return 0, "S"
    if test == "UDP_STREAM":
        req = args.get("req", "1472", V.to_size)
        if not 1 <= req <= 65507:
            raise args.error_at("req", f"DO_CLIENT: UDP datagram size {req} is not in 1..65507")
        return req, req_raw if "req" in args else "1472"
    return args.get("req", "1M", V.to_size), req_raw


def _crr_close(args: Args, test: str) -> str:
    """``crr_close=`` (TCP_CRR only): who ends each transaction's connection (default ``rst``)."""
    if "crr_close" not in args:
        return "rst"
    raw = args.defined("crr_close")
    if raw not in CRR_CLOSES:
        raise args.error_at("crr_close", f"DO_CLIENT: unknown crr_close {raw!r}",
                            suggest(raw, CRR_CLOSES) or "crr_close: " + ", ".join(CRR_CLOSES))
    if test != "TCP_CRR":
        raise args.error_at("crr_close", f"DO_CLIENT: crr_close={raw} is for test=TCP_CRR, not {test}")
    return raw


def _mix(text: str) -> tuple[tuple[str, int | None], ...]:
    """``cubic``, ``bbr+cubic``, ``bbr:2+cubic:1``: flows of each congestion control together, in one
    experiment (a ``:count`` is that group's instances)."""
    if "," in text:
        raise ValueError(f"bad congestion control {text!r}: a comma list runs the macro once per value only "
                         "when RUN gives it; flows of several in one experiment are joined with + (ca=bbr+cubic)")
    out = []
    for item in text.split("+"):
        cc, sep, count = item.partition(":")
        out.append((V.name(cc, "congestion control"), V.to_int(count, low=1, high=10000) if sep else None))
    return tuple(out)


def _each(conv: Callable[[str], float]) -> Callable[[str], tuple[float, ...]]:
    """A ``+`` list of values, one per congestion control of a mix (or one for all)."""
    return lambda text: tuple(conv(part) for part in text.split("+"))


def _per_mix(args: Args, key: str, values: tuple[float, ...], n: int) -> tuple[float, ...]:
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise args.error_at(key, f"DO_CLIENT: {key}={args.raw(key)} has {len(values)} values for {n} congestion "
                                 "control(s) of ca", f"give one {key}, or one per congestion control, joined with +")
    return values


def do_client(args: Args, book: Book) -> Iterator[Action]:
    """One DO_CLIENT, or one per congestion control of a mix (``ca=bbr+cubic``: each its own group)."""
    host, exp, exp_name = book.common(args)
    if "server" not in args:
        raise args.error("DO_CLIENT: server= is required", "e.g. DO_CLIENT host=h1 server=h2 test=TCP_STREAM")
    server = book.host(args, "server")
    book.last_host = host  # server= does not change the default host
    g = args.get
    mix = g("ca", "reno", _mix)
    durs = _per_mix(args, "dur", g("dur", "20", _each(lambda s: V.to_float(s, low=0.001, high=MAX_FLOW_SECONDS))),
                    len(mix))
    delays = _per_mix(args, "delay", g("delay", "0", _each(lambda s: V.to_float(s, low=0, high=MAX_SECONDS))),
                      len(mix))
    instances = g("instances", "1", lambda s: V.to_int(s, low=1, high=10000))
    test = _test(args)
    driver = g("driver", "builtin", lambda s: s)
    drawn = workload_args(args, test, driver, instances)  # docs/workloads.md
    req, req_text = (drawn.pop("req"), args.raw("req")) if "req" in drawn else _request(args, test)
    reply = drawn.pop("reply") if "reply" in drawn else g("reply", "1", V.to_size)
    stats = g("stats", "0", lambda s: V.to_int(s, low=0, high=1))
    local_buffer = g("localBuffer", "0", V.to_size)
    remote_buffer = g("remoteBuffer", "0", V.to_size)
    group = g("group", "0", lambda s: V.to_int(s, low=0))
    if driver not in DRIVERS:
        raw = args.raw("driver")
        raise args.error_at("driver", f"DO_CLIENT: unknown driver {raw!r}",
                            suggest(raw, DRIVERS) or "drivers: " + ", ".join(DRIVERS))
    pacing = g("pacing", "0", V.to_bits)
    rate = g("rate", "0", V.to_bits)
    interval = g("interval", "0.01", lambda s: V.to_float(s, low=0.001, high=60))
    crr_close = _crr_close(args, test)
    trace = g("trace", "", _trace_ends)
    for i, ((ca, count), dur, delay) in enumerate(zip(mix, durs, delays)):
        flow_group = book.group(exp) if group == 0 else group + i
        # Flow ids are <client>-<server>-<group>-<instance>: a second DO_CLIENT with the
        # same ones would replace the first one's flows and data.
        pair = (exp, host, server, flow_group)
        first = book.pairs.get(pair)
        if first is not None:
            raise args.error(f"DO_CLIENT: flows {host}-{server}-{flow_group}-* are already in experiment {exp} "
                             f"(from {first})", "give one of them another group=N")
        line = args.node.line
        book.pairs[pair] = f"{line.file}:{line.lineno}"
        book.fetched.clear()
        book.links.started()  # the SET_LINKs before it shape these flows
        yield DoClient(
            loc=args.loc, host=host, exp=exp, exp_name=exp_name, server=server,
            ca=ca, dur=dur, delay=delay, instances=count or instances, req=req, req_text=req_text,
            reply=reply, stats=stats, local_buffer=local_buffer, remote_buffer=remote_buffer,
            test=test, group=flow_group, driver=driver, pacing=pacing, rate=rate,
            interval=interval, crr_close=crr_close, trace=trace, **drawn,
        )


def get_data(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args)
    if (host, exp) in book.fetched:
        return  # the original skips a repeated GET_DATA until the next DO_*
    book.fetched.add((host, exp))
    yield GetData(loc=args.loc, host=host, exp=exp, exp_name=exp_name)


def set_sysctl(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args, consume=False)
    settings: list[tuple[str, tuple[str, ...]]] = []
    for key, _, tok in args:
        if key in COMMON:
            continue
        raw = args.defined(key)
        try:
            settings.append(V.sysctl_setting(key, raw))
        except KeyError:
            allowed = sorted(V.SYSCTLS)
            hint = suggest(key, allowed)
            raise args.error(f"SET_SYSCTL: sysctl {key!r} is not allowed",
                             (hint + " " if hint else "") + "allowed: " + ", ".join(allowed), col=tok.col) from None
        except ValueError as exc:
            raise args.error(f"SET_SYSCTL: {exc}", col=tok.col) from None
    if not settings:
        raise args.error("SET_SYSCTL: no sysctl=value given", "e.g. SET_SYSCTL host=h1 net.ipv4.tcp_ecn=1")
    yield SetSysctl(loc=args.loc, host=host, exp=exp, exp_name=exp_name, settings=tuple(settings))


def set_module_params(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args, consume=False)
    modules = ", ".join(sorted(V.MODULE_PARAMS))
    if "module" not in args:
        raise args.error("SET_MODULE_PARAMS: module= is required", "modules: " + modules)
    module = args.raw("module")
    if module not in V.MODULE_PARAMS:
        hint = suggest(module, list(V.MODULE_PARAMS))
        raise args.error_at("module", f"SET_MODULE_PARAMS: module {module!r} is not allowed",
                            (hint + " " if hint else "") + "modules: " + modules)
    allowed = V.MODULE_PARAMS[module]
    params: list[tuple[str, str]] = []
    for key, raw, tok in args:
        if key in COMMON or key == "module":
            continue
        if key not in allowed:
            hint = suggest(key, allowed)
            raise args.error(f"SET_MODULE_PARAMS: {module} parameter {key!r} is not allowed",
                             (hint + " " if hint else "") + "allowed: " + ", ".join(allowed), col=tok.col)
        args.check(key, lambda s: V.word(s, "value"))
        params.append((key, raw))
    if not params:
        raise args.error("SET_MODULE_PARAMS: no parameter given", f"{module} parameters: " + ", ".join(allowed))
    yield SetModuleParams(loc=args.loc, host=host, exp=exp, exp_name=exp_name,
                          module=module, params=tuple(params))


def set_netem(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args, consume=False)
    if "netem_delay" not in args and "delay" not in args:
        raise args.error("SET_NETEM: netem_delay= is required", "delay in ms; netem_delay=0 removes netem")
    if "netem_delay" in args and "delay" in args:
        raise args.error_at("delay", "SET_NETEM: give netem_delay= or delay=, not both")
    g = args.get
    delay = g("netem_delay" if "netem_delay" in args else "delay", "0",
              lambda s: V.to_float(s, low=0, high=60000))
    yield SetNetem(
        loc=args.loc, host=host, exp=exp, exp_name=exp_name, delay=delay,
        limit=g("limit", "1000", lambda s: V.to_int(s, low=1, high=10**7)),
        loss=g("loss", "0", lambda s: V.to_float(s, low=0, high=100)),
        jitter=g("jitter", "0", lambda s: V.to_float(s, low=0, high=60000)),
        rate=g("rate", "0", V.to_bits),
    )


def _qdisc_action(s: str) -> str:
    if s not in V.QDISC_ACTIONS:
        raise ValueError(f"expected one of add, change, replace, del; got {s!r}")
    return s


def _qdisc_other(s: str) -> str:
    return " ".join(qdisc_other_words(s))  # "mpu,64" -> the tc words "mpu 64", as the agent takes them


def set_qdisc(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args, consume=False)
    if "qdisc" not in args:
        raise args.error("SET_QDISC: qdisc= is required", "qdiscs: " + ", ".join(V.QDISCS))
    qdisc = args.defined("qdisc")
    if qdisc not in V.QDISCS:
        hint = suggest(qdisc, V.QDISCS)
        raise args.error_at("qdisc", f"SET_QDISC: unknown qdisc {qdisc!r}",
                            (hint + " " if hint else "") + "qdiscs: " + ", ".join(V.QDISCS))
    g = args.get
    yield SetQdisc(
        loc=args.loc, host=host, exp=exp, exp_name=exp_name, qdisc=qdisc,
        action=g("action", "", _qdisc_action),
        rate=g("rate", "", lambda s: V.tc_rate(s) if s else ""),
        burst=g("burst", "", lambda s: V.tc_size(s, "burst") if s else ""),
        limit=g("limit", "", lambda s: V.tc_size(s, "limit") if s else ""),
        other=g("other", "", _qdisc_other),
    )


def do_tcpdump(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args)
    if "server" not in args:
        raise args.error("DO_TCPDUMP: server= is required", "server=X captures without a host filter")
    raw = args.raw("server")
    args.check("server", lambda s: V.word(s, "server"))
    server = raw if raw in ("X", "x") else book.qualify(raw)  # X: no host filter (runner: X or x)
    packets = args.get("packets", "10000", lambda s: V.to_int(s, low=1, high=10**8))
    yield DoTcpdump(loc=args.loc, host=host, exp=exp, exp_name=exp_name, server=server, packets=packets)


def _trace_ends(s: str) -> str:
    if s and s not in TRACE_ENDS:
        raise ValueError(f"expected one of {', '.join(TRACE_ENDS)}; got {s!r}")
    return s


def do_trace(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args)
    buffer = args.get("buffer", "4M", V.to_size)
    if not 64 * 1024 <= buffer <= 1 << 30:
        raise args.error_at("buffer", f"DO_TRACE: buffer={args.raw('buffer')} is outside 64K..1G (per CPU)")
    yield DoTrace(loc=args.loc, host=host, exp=exp, exp_name=exp_name, buffer_kb=buffer // 1024)


def _ports(s: str) -> tuple[int, ...]:
    return tuple(V.to_int(p, low=1, high=65535) for p in s.split(",")) if s else ()


def _addrs(s: str) -> tuple[str, ...]:
    out = []
    for a in s.split(",") if s else ():
        try:
            out.append(str(ipaddress.ip_network(a, strict=False)) if "/" in a else str(ipaddress.ip_address(a)))
        except ValueError:
            raise ValueError(f"bad address {a!r}: expected 10.0.0.2, 10.0.0.0/24 or fd00::/64") from None
    return tuple(out)


def _cgroup(s: str) -> str:
    if s and (not _CGROUP.match(s) or ".." in s):
        raise ValueError(f"bad cgroup {s!r}: a cgroup v2 directory (letters, digits, '_', '.', '@', ':', '-', '/')")
    return s


def do_watch(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args)
    g = args.get
    ports, lports, rports = g("port", "", _ports), g("lport", "", _ports), g("rport", "", _ports)
    addrs, cgroup = g("addr", "", _addrs), g("cgroup", "", _cgroup)
    pid = g("pid", "0", lambda s: V.to_int(s, low=0))
    if not (ports or lports or rports or addrs or cgroup or pid):
        raise args.error("DO_WATCH: nothing to watch", "give port=, lport=, rport=, addr=, cgroup= or pid=, "
                                                       "e.g. DO_WATCH host=h1 port=5000")
    yield DoWatch(loc=args.loc, host=host, exp=exp, exp_name=exp_name,
                  name=g("name", "watch", lambda s: V.name(s, "watch name")), ports=ports, lports=lports,
                  rports=rports, addrs=addrs, cgroup=cgroup, pid=pid,
                  interval=g("interval", "0.01", lambda s: V.to_float(s, low=0.001, high=60)))


def process_exp(args: Args, book: Book) -> Iterator[Action]:
    if "exp" not in args and book.last_exp is None:
        raise args.error("PROCESS_EXP: no experiment to process", "run DO_SERVER/DO_CLIENT first or give exp=N")
    exp = book.exp(args)
    book.exp_name(args)
    book.group_exp, book.group_next = exp, 1
    yield ProcessExp(loc=args.loc, exp=exp, desc=book.desc, other=book.other)


def close(args: Args, book: Book) -> Iterator[Action]:
    """CLOSE and EXIT: the original's, with nothing left for them to do (arguments still checked)."""
    return iter(())


BUILDERS: dict[str, Callable[[Args, Book], Iterator[Action]]] = {
    "DO_SERVER": do_server,
    "DO_CLIENT": do_client,
    "GET_DATA": get_data,
    "SET_SYSCTL": set_sysctl,
    "SET_MODULE_PARAMS": set_module_params,
    "SET_NETEM": set_netem,
    "SET_QDISC": set_qdisc,
    "SET_LINK": linkcmd.set_link,
    "DO_TCPDUMP": do_tcpdump,
    "DO_TRACE": do_trace,
    "DO_WATCH": do_watch,
    "PROCESS_EXP": process_exp,
    "CLOSE": close,
    "EXIT": close,
}

__all__ = [
    "ARGS",
    "BUILDERS",
    "MAX_SECONDS",
    "close",
    "do_client",
    "do_server",
    "do_tcpdump",
    "do_trace",
    "do_watch",
    "get_data",
    "process_exp",
    "set_module_params",
    "set_netem",
    "set_qdisc",
    "set_sysctl",
]
