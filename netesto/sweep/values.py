"""A sweep parameter's value: checked against the kind the notebook declares, never text of a command line.

The point notebook's ``parameters`` cell gives each name a default, and the default
its kind: ``dur = 3`` an int, ``x = 0.5`` a float, ``on = False`` a bool, and a text
default a rate (``"100mbit"``), a time (``"20ms"``), a size (``"64K"``) or a word
(``"cubic"``). ``bw``, ``rtt``, ``jitter``, ``buffer``, ``loss`` and ``host_rtt`` with a text
default are what a testbed takes for them; ``ca``, ``dur`` and ``delay`` with a text default
are a flow mix's (:mod:`netesto.sweep.mix`: ``bbr+cubic``, ``30+20``). A word is letters, digits and ``_ . : / + @ % =`` and ``-``
(not first), at most :data:`MAX_VALUE_CHARS` characters: no space, quote, ``$``,
``;``, ``{``, newline, nothing a shell, an option parser or a ``%%netesto`` line
could read as more than one value.

>>> kind_of("bw", "100mbit"), kind_of("name", "cubic"), kind_of("dur", 3), kind_of("hold", "20ms")
('rate', 'word', 'int', 'time')
>>> checked("ca", "bbr", "cubic"), checked("dur", "5", 3), checked("bw", "10mbit", "100mbit")
('bbr', 5, '10mbit')
"""

from __future__ import annotations

import re
from typing import Any, Callable

from netesto.errors import NetestoError, SweepError

MAX_VALUE_CHARS = 256
_WORD = re.compile(r"^(?:[A-Za-z0-9_.:/+@%=][A-Za-z0-9_.:/+@%=-]*)?$")  # empty too: "" is a default
# The names a testbed reshapes (netesto.sweep.point.SHAPE_PARAMS): their kind is the testbed's; and
# the names of a flow mix (netesto.sweep.mix): ca a + list of groups, dur and delay seconds per group.
NAMED_KINDS = {"bw": "rate", "rtt": "time", "jitter": "time", "buffer": "buffer", "loss": "loss",
               "host_rtt": "host_times", "ca": "mix", "dur": "seconds", "delay": "seconds"}


def _rate(text: str) -> None:
    from netesto.vocab import parse_rate

    parse_rate(text)


def _time(text: str) -> None:
    from netesto.vocab import parse_time_ms

    parse_time_ms(text)


def _size(text: str) -> None:
    from netesto.vocab import parse_size

    parse_size(text)


def _buffer(text: str) -> None:
    from netesto.testbed.shaping import parse_buffer

    parse_buffer(text, 100_000_000, 20.0)  # the rate and RTT only scale a BDP; the form is what is checked


def _loss(text: str) -> None:
    from netesto.testbed.config import parse_loss

    parse_loss(text)


def _host_times(text: str) -> None:
    from netesto.vocab import parse_host_times

    parse_host_times(text)


def _mix(text: str) -> None:
    from netesto.sweep.mix import Mix

    Mix.parse(text)


def _seconds(text: str) -> None:
    for part in text.split("+"):
        value = float(part)
        if not (0 <= value < float("inf")):
            raise ValueError(text)


def _word(text: str) -> None:
    if not _WORD.match(text):
        raise ValueError("a word of letters, digits and _ . : / + @ % = - (not first): no space, quote, $, ;, "
                         "braces or newline")


# A text kind's check (ValueError or NetestoError when the text is not one) and what it expects.
TEXT_KINDS: dict[str, tuple[Callable[[str], None], str]] = {
    "rate": (_rate, "a rate such as 10mbit or 1gbit"),
    "time": (_time, "a time such as 20ms, 0.5s or 500us"),
    "size": (_size, "a size such as 64K or 1M"),
    "buffer": (_buffer, "a buffer such as 1bdp, 0.5bdp or 256k"),
    "loss": (_loss, "a loss percentage such as 1 or 0.5%"),
    "host_times": (_host_times, "host RTTs such as h3:40ms or h2:20ms+h3:60ms"),
    "mix": (_mix, "congestion controls, + joining those of one experiment: cubic, bbr+cubic, bbr:2+cubic:1"),
    "seconds": (_seconds, "seconds, or one per group of ca joined with +: 30 or 30+20"),
    "word": (_word, "a word"),
}
_UNITS = re.compile(r"[A-Za-z]")


def kind_of(name: str, default: Any) -> str:
    """The kind of parameter ``name`` whose notebook default is ``default``."""
    if name in NAMED_KINDS and (default is None or isinstance(default, str)):  # loss = 0 stays a number
        return NAMED_KINDS[name]
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if default is None or default == "":
        return "word"
    if not isinstance(default, str):
        return type(default).__name__  # a list, a dict, an expression: not a value a sweep sets
    if _UNITS.search(default):  # "20ms", "100mbit", "64K": a bare number stays a word
        for kind in ("time", "rate", "size"):
            try:
                TEXT_KINDS[kind][0](default)
            except (ValueError, NetestoError):
                continue
            return kind
    return "word"


def checked(name: str, value: Any, default: Any) -> Any:
    """``value`` (command-line text or a Python value) as the kind of ``default``, else a
    SweepError naming the parameter, the value and the kind."""
    kind = kind_of(name, default)
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        raise SweepError(f"parameter {name}: a value of {len(value)} characters (at most {MAX_VALUE_CHARS})")
    if kind in ("bool", "int", "float"):
        return _number(name, value, kind, default)
    if kind not in TEXT_KINDS:
        raise SweepError(f"parameter {name}: its default {default!r} is a {kind}; a sweep sets int, float, bool "
                         "and text parameters")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SweepError(f"parameter {name}={value!r}: a {type(value).__name__}; give text")
    text = str(value)
    check, expected = TEXT_KINDS[kind]
    try:
        check(text)
        _word(text)  # every text kind is also a word: none of them needs a space or a quote
    except (ValueError, NetestoError):
        why = f"{expected}, as the notebook's default {default!r}" if kind != "word" else TEXT_KINDS["word"][1]
        raise SweepError(f"parameter {name}={text!r}: not {why}") from None
    return text


def _number(name: str, value: Any, kind: str, default: Any) -> Any:
    if isinstance(value, bool) and kind == "bool" or (not isinstance(value, (bool, str))
                                                      and isinstance(value, int) and kind in ("int", "float")):
        return float(value) if kind == "float" else value
    if isinstance(value, float) and kind == "float":
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        try:
            if kind == "bool":
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off"):
                    return False
            elif kind == "int":
                return int(low)
            elif float(low) == float(low) and abs(float(low)) != float("inf"):
                return float(low)
        except ValueError:
            pass
    raise SweepError(f"parameter {name}={value!r}: the notebook's default is {kind} ({default!r}); "
                     "give a value of that type")


__all__ = ["MAX_VALUE_CHARS", "NAMED_KINDS", "TEXT_KINDS", "checked", "kind_of"]
