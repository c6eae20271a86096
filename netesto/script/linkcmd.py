"""SET_LINK: the bottleneck toward a host changes while the next flows run (values at times, shapes, traces).

::

    SET_LINK host=h1 rate=50mbit                       # from the flows' start
    SET_LINK host=h1 at=2 rate=10mbit delay=30         # 2 s after it
    SET_LINK host=h1 rate=ramp(50mbit,10mbit,at=2,to=4,every=0.2)
    SET_LINK host=h2 trace=cellular buffer=100pkt      # deliver at a trace's opportunities
    DO_CLIENT host=h2 server=h1 test=TCP_STREAM dur=6  # the schedule starts with these flows

Every SET_LINK before a DO_CLIENT adds to the schedule of the flows that
DO_CLIENT (and those right after it) starts; their start is time 0. Each
value and shape is checked here, at plan time: an unknown parameter or
shape ("did you mean"), a value out of range, times that go backwards (in a
shape, or across lines for one parameter of one link), a trace file that
does not exist or does not parse, a SET_LINK no flows follow.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from netesto.errors import ScriptError
from netesto.linkshape import PARAMS, check_forward, parse_shape, seconds, split_shape
from netesto.linktrace import find_trace, read_trace
from netesto.script import validate as V
from netesto.script.actions import Action, SetLink
from netesto.script.book import COMMON, Book
from netesto.script.located import Args

ARGS = COMMON + ("at", *PARAMS, "trace")


def _trace_file(args: Args) -> str:
    word = args.defined("trace")
    if not word or len(word) > 4096 or "\0" in word:
        raise args.error_at("trace", f"SET_LINK: bad trace {word[:40]!r}: a shipped trace's name or a file's path")
    dirs = [Path(d) for d in (args.frame.base_dir, os.getcwd()) if d]
    try:
        path = find_trace(word, dirs)
        read_trace(path)  # parsed now, so a broken file is refused before anything runs
    except (LookupError, ValueError) as exc:
        raise args.error_at("trace", f"SET_LINK: {exc.args[0]}") from None
    return str(path)


def _buffer_text(args: Args, trace: bool) -> str:
    text = args.defined("buffer")
    if text.endswith("pkt"):
        if not trace:
            raise args.error_at("buffer", f"SET_LINK: buffer={text}: a queue in packets is for a trace link",
                                "the bottleneck's queue is in bytes (forwarded packets can be 64 KB): e.g. 150k")
        args.check("buffer", lambda s: V.to_int(s[:-3], low=1, high=1_000_000))
    elif trace:
        args.check("buffer", lambda s: str(PARAMS["buffer"].value(s)))
    return text


def set_link(args: Args, book: Book) -> Iterator[Action]:
    host, exp, exp_name = book.common(args, consume=False)
    lb = book.links
    where = f"{args.node.line.file}:{args.node.line.lineno}"
    given = [p for p in PARAMS if p in args]
    trace = "trace" in args
    if not given and not trace:
        raise args.error("SET_LINK: nothing to set", "give rate=, delay=, jitter=, loss=, buffer= or trace=")
    at = args.get("at", "0", seconds)
    trace_file = _trace_file(args) if trace else ""
    if trace:
        if "at" in args:
            raise args.error_at("at", "SET_LINK: a trace runs from the flows' start; at= is for values")
        for bad in ("rate", "jitter"):
            if bad in args:
                raise args.error_at(bad, f"SET_LINK: a trace link has no {bad}= "
                                    + ("(the trace is its rate)" if bad == "rate" else "(it keeps packets in order)"))
        if host in lb.traces:
            raise args.error_at("trace", f"SET_LINK: the link toward {host} already has a trace (from {lb.traces[host]})")
        if host in lb.rates:
            raise args.error_at("trace", f"SET_LINK: the link toward {host} has a rate (from {lb.rates[host]}): "
                                "a trace link's rate is its trace")
        lb.traces[host] = where
    elif "rate" in args and host in lb.traces:
        raise args.error_at("rate", f"SET_LINK: the link toward {host} follows a trace (from {lb.traces[host]})")
    texts = {p: args.defined(p) for p in given}
    if "buffer" in texts:
        texts["buffer"] = _buffer_text(args, trace)
    for param, text in texts.items():
        if param == "buffer" and trace:
            continue
        try:
            shaped = split_shape(text) is not None
            steps = parse_shape(param, text, 0.0 if shaped else at)
        except ValueError as exc:
            raise args.error_at(param, f"SET_LINK: {exc}") from None
        if shaped and "at" in args:
            raise args.error_at("at", f"SET_LINK: {param}={text}: a shape carries its own times; at= is for values")
        last = lb.times.get((host, param))
        times = [s.at for s in steps]
        if last is not None:
            try:
                check_forward([last[0], *times], f"{param} toward {host}")
            except ValueError as exc:
                where_at = "at" if not shaped and "at" in args else param
                raise args.error_at(where_at, f"SET_LINK: {exc}", f"its time before is set at {last[1]}") from None
        lb.times[(host, param)] = (times[-1], where)
    if "rate" in texts:
        lb.rates[host] = where
    if lb.dangling is None:
        lb.dangling = args.error("SET_LINK: no DO_CLIENT follows: a link schedule starts with the flows of the "
                                 "next DO_CLIENT", "add the flows after it, or remove it")
    yield SetLink(loc=args.loc, host=host, exp=exp, exp_name=exp_name, at=at, trace=args.raw("trace") if trace else "",
                  trace_file=trace_file, **texts)


def check_ended(book: Book) -> None:
    """At the end of a script: a SET_LINK that no DO_CLIENT followed is an error where it stands."""
    lb = book.links
    if lb.dangling is not None:
        err, lb.dangling = lb.dangling, None
        lb.started()
        raise err


__all__ = ["ARGS", "check_ended", "set_link"]
