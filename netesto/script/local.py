"""The builders of the commands the controller runs itself: SET, SET_EXP, HOST_SUFFIX,
DESC, OTHER, WAIT, RAND_WAIT, ECHO, DEBUG (and _DISABLE, _RESTORE), NEXT_COUNTER.

One function per command; each reads its words through the :class:`Site` it
runs at (errors point into the script) and changes the evaluator's variables
and switches or the experiment :class:`~netesto.script.book.Book`.
"""

from __future__ import annotations

from typing import Callable, Iterator

from netesto.script import validate as V
from netesto.script.actions import Action, Debug, Echo, RandWait, Wait
from netesto.script.book import Book
from netesto.script.evaluator import VARNAME
from netesto.script.expr import ExprError, evaluate
from netesto.script.located import Site
from netesto.script.remote import MAX_SECONDS

_ON = ("1", "T", "TRUE", "ON")
_OFF = ("0", "F", "FALSE", "OFF")


def set_var(site: Site, book: Book) -> None:
    toks = site.ev.tokens(site.node, site.frame)
    if len(toks) != 1 or "=" not in toks[0].text:
        raise site.error("SET takes one name=value", "values cannot contain spaces; e.g. SET dur=60",
                         col=toks[1].col if len(toks) > 1 else None)
    key, _, value = toks[0].text.partition("=")
    if not VARNAME.match(key):
        raise site.error(f"bad variable name {key!r}", "letters, digits and _ only", col=toks[0].col)
    if key == "forLoopPrint":
        site.ev.for_loop_print = site.ev.truthy(value)
        return
    site.ev.assign(key, value)


def set_exp(site: Site, book: Book) -> None:
    ev = site.ev
    toks = ev.tokens(site.node, site.frame)
    if len(toks) != 1 or "=" not in toks[0].text:
        raise site.error("SET_EXP takes one name=expression",
                         "no spaces inside the expression, e.g. SET_EXP d=$dur/3+2")
    key, _, expr = toks[0].text.partition("=")
    if not VARNAME.match(key):
        raise site.error(f"bad variable name {key!r}", col=toks[0].col)
    try:
        value = evaluate(expr, lambda n: ev.lookup(n, site.frame))
    except ExprError as exc:
        raise site.error(f"SET_EXP: {exc}", "integers, variables, + - * / and parentheses",
                         col=toks[0].col + len(key) + 1 + exc.pos) from None
    ev.assign(key, str(value))


def host_suffix(site: Site, book: Book) -> None:
    toks = site.ev.tokens(site.node, site.frame)
    if len(toks) > 1:
        raise site.error("HOST_SUFFIX takes one suffix", col=toks[1].col)
    suffix = toks[0].text.lstrip(".") if toks else ""
    if suffix.upper() == "NONE":
        suffix = ""
    if suffix:
        site.convert("suffix", suffix, toks[0].col, lambda s: V.word(s, "host suffix"))
    book.host_suffix = suffix
    book.suffix_set = True


def desc(site: Site, book: Book) -> None:
    book.desc = site.rest()


def other(site: Site, book: Book) -> None:
    text = site.rest().strip()
    pairs: list[tuple[str, str]] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise site.error(f"OTHER: expected key=value items, got {item!r}", "e.g. OTHER netem=10,bw=100mbit")
        pairs.append((key.strip(), value.strip()))
    book.other = tuple(pairs)


def _seconds(s: str) -> float:
    return V.to_float(s, low=0, high=MAX_SECONDS)


def wait(site: Site, book: Book) -> Iterator[Action]:
    toks = site.ev.tokens(site.node, site.frame)
    if len(toks) != 1:
        raise site.error("WAIT takes one number of seconds")
    secs = site.convert("seconds", toks[0].text, toks[0].col, _seconds)
    yield Wait(loc=site.loc, seconds=float(secs))


def rand_wait(site: Site, book: Book) -> Iterator[Action]:
    toks = site.ev.tokens(site.node, site.frame)
    if len(toks) not in (1, 2):
        raise site.error("RAND_WAIT takes 'max' or 'min max' seconds")
    nums = [float(site.convert("seconds", t.text, t.col, _seconds)) for t in toks]
    low, high = (0.0, nums[0]) if len(nums) == 1 else (nums[0], nums[1])
    if high < low:
        raise site.error(f"RAND_WAIT: max {high:g} is below min {low:g}", col=toks[-1].col)
    yield RandWait(loc=site.loc, low=low, high=high)


def echo(site: Site, book: Book) -> Iterator[Action]:
    node = site.node
    text = site.rest()
    site.ev.undefined(text, site.frame, node.line, node.col)
    yield Echo(loc=site.loc, text=text)


def debug(site: Site, book: Book) -> Iterator[Action]:
    """DEBUG 0/1, DEBUG_DISABLE (off, remembering the setting), DEBUG_RESTORE (back to it)."""
    ev, name = site.ev, site.node.name
    toks = ev.tokens(site.node, site.frame)
    if name == "DEBUG":
        value = toks[0].text if len(toks) == 1 else ""
        if value.upper() in _ON:
            ev.debug = True
        elif value.upper() in _OFF:
            ev.debug = False
        else:
            raise site.error(f"DEBUG takes 0, 1, T or F, got {value!r}", col=toks[0].col if toks else None)
    elif toks:
        raise site.error(f"{name} takes no arguments", col=toks[0].col)
    elif name == "DEBUG_DISABLE":
        ev.debug_saved, ev.debug = ev.debug, False
    else:
        ev.debug = ev.debug_saved
    yield Debug(loc=site.loc, enabled=ev.debug)


def next_counter(site: Site, book: Book) -> None:
    if site.node.args:
        raise site.error("NEXT_COUNTER takes no arguments", col=site.node.args[0].col)
    book.counter.round_up()


BUILDERS: dict[str, Callable[[Site, Book], Iterator[Action] | None]] = {
    "SET": set_var,
    "SET_EXP": set_exp,
    "HOST_SUFFIX": host_suffix,
    "DESC": desc,
    "OTHER": other,
    "WAIT": wait,
    "RAND_WAIT": rand_wait,
    "ECHO": echo,
    "DEBUG": debug,
    "DEBUG_DISABLE": debug,
    "DEBUG_RESTORE": debug,
    "NEXT_COUNTER": next_counter,
}

__all__ = [
    "BUILDERS",
    "debug",
    "desc",
    "echo",
    "host_suffix",
    "next_counter",
    "other",
    "rand_wait",
    "set_exp",
    "set_var",
    "wait",
]
