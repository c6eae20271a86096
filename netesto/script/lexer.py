"""Lexer: script text -> logical lines of whitespace-separated tokens with columns.

Rules of the original language: ``#`` starts a comment anywhere on a line, a
line ending in a backslash continues on the next one (joined with one space),
``BEGIN_COMMENT`` ... ``END_COMMENT`` skips a block, blank lines are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from netesto.errors import ScriptError

_WORD = re.compile(r"\S+")
# Lines end at \n, \r\n or \r only: str.splitlines() also breaks at form feeds,
# U+2028 and other separators, which would put every later line number off by one.
_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Token:
    """One whitespace-delimited word and its 1-based column in the logical line."""

    text: str
    col: int


@dataclass(frozen=True, slots=True)
class Line:
    """A logical line: continuation joined, comment removed, tokens located."""

    file: str
    lineno: int
    text: str
    tokens: tuple[Token, ...]


def tokenize(text: str, offset: int = 0) -> tuple[Token, ...]:
    """Split ``text`` on whitespace keeping 1-based columns (plus ``offset``).

    >>> [(t.text, t.col) for t in tokenize("SET  a=1")]
    [('SET', 1), ('a=1', 6)]
    """
    return tuple(Token(m.group(), m.start() + 1 + offset) for m in _WORD.finditer(text))


def _strip_comment(raw: str) -> str:
    cut = raw.find("#")
    if cut >= 0:
        raw = raw[:cut]
    return raw.rstrip()


def logical_lines(text: str, file: str = "<script>") -> Iterator[Line]:
    """Yield the logical lines of ``text`` (1-based line number of their first part)."""
    pending: str | None = None
    pending_line = 0
    in_comment = 0  # line number of the open BEGIN_COMMENT, 0 = none
    lineno = 0
    for lineno, raw in enumerate(_NEWLINE.split(text), start=1):
        stripped = raw.strip()
        if in_comment:
            if stripped.startswith("END_COMMENT"):
                in_comment = 0
            continue
        body = _strip_comment(raw)
        if pending is None and body.strip().startswith("BEGIN_COMMENT"):
            in_comment = lineno
            continue
        if body.endswith("\\"):
            part = body[:-1].rstrip()
            if pending is None:
                pending, pending_line = part, lineno
            else:
                pending = pending + " " + part.strip()
            continue
        if pending is not None:
            body = pending + " " + body.strip()
            start, pending = pending_line, None
        else:
            start = lineno
        if not body.strip():
            continue
        yield Line(file, start, body, tokenize(body))
    if pending is not None and pending.strip():
        yield Line(file, pending_line, pending, tokenize(pending))
    if in_comment:
        raise ScriptError(
            "BEGIN_COMMENT without a matching END_COMMENT",
            file=file,
            line=in_comment,
            column=1,
            text="BEGIN_COMMENT",
            hint="close the block with a line starting with END_COMMENT",
        )


__all__ = ["Line", "Token", "logical_lines", "tokenize"]
