"""Text from the network made safe to show: control characters escaped, length bounded.

An agent's error message, a claim's run and controller names, a flow's error, a
host name from ``hello``: any string a peer sent may hold escape sequences (which
recolour, retitle or clear a terminal), carriage returns and newlines (which forge
whole lines of a log or of another run's output) or megabytes of text. Every place
such a string reaches a terminal or a log line goes through :func:`printable`; log
handlers of the agent use :class:`PrintableFormatter`, which applies it to each
record's message.

>>> printable("lab busy: run \\x1b[2J\\nERROR forged")
'lab busy: run \\\\x1b[2J\\\\nERROR forged'
>>> printable("x" * 50, limit=10)
'xxxxxxxxxx... (40 more characters)'
"""

from __future__ import annotations

import logging
import re

from netesto.policy import MAX_SHOWN_TEXT

# C0 controls (tab kept), DEL, C1 controls, and the Unicode format characters that
# reorder or hide text on a terminal (bidi overrides and isolates, zero-width joiners).
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) <= 0xFF else f"\\u{ord(c):04x}"


def printable(text: object, limit: int | None = MAX_SHOWN_TEXT) -> str:
    """``text`` (made a string) with every control character escaped (``\\n``, ``\\x1b``,
    ``\\u202e``), cut to ``limit`` characters (None: no limit) with a note of how many
    were left out. Cutting comes first: a huge string costs no more than ``limit``."""
    s = text if isinstance(text, str) else str(text)
    more = 0
    if limit is not None and len(s) > limit:
        s, more = s[:limit], len(s) - limit
    s = _UNSAFE.sub(_escape, s)
    return f"{s}... ({more} more characters)" if more else s


class PrintableFormatter(logging.Formatter):
    """A log formatter whose messages are :func:`printable` (one record, one line).

    A traceback keeps its own lines, each escaped: an exception's text may quote a peer."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: object) -> str:  # type: ignore[override]
        text = super().formatException(ei)  # type: ignore[arg-type]
        return "\n".join(printable(line, None) for line in text.splitlines())


__all__ = ["PrintableFormatter", "printable"]
