"""SET_EXP: integer expressions with + - * / (floor division) and parentheses.

Bare variable names are allowed (``dur/3``), as the paper writes them.
"""

from __future__ import annotations

import re
from typing import Callable

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")
MAX_DEPTH = 100


class ExprError(ValueError):
    """A bad expression; ``pos`` is the 0-based offset of the problem."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def evaluate(text: str, lookup: Callable[[str], str | None]) -> int:
    """Evaluate ``text``; ``lookup(name)`` gives a variable's value or None.

    >>> evaluate("60/3+3", lambda n: None), evaluate("(1+2)*-3", lambda n: None)
    (23, -9)
    >>> evaluate("dur/3", {"dur": "60"}.get)
    20
    """
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        start = m.start(m.lastindex or 0)
        if m.group(1) is not None:
            tokens.append(("num", m.group(1), start))
        elif m.group(2) is not None:
            tokens.append(("name", m.group(2), start))
        elif m.group(3) is not None:
            ch = m.group(3)
            if ch not in "+-*/()":
                raise ExprError(f"unexpected character {ch!r} in expression", start)
            tokens.append(("op", ch, start))
        pos = m.end()
    tokens.append(("end", "", len(text)))
    index = 0

    def peek() -> tuple[str, str, int]:
        return tokens[index]

    def advance() -> tuple[str, str, int]:
        nonlocal index
        tok = tokens[index]
        index += 1
        return tok

    def atom(depth: int) -> int:
        if depth > MAX_DEPTH:
            raise ExprError("expression nested too deeply", peek()[2])
        kind, value, at = advance()
        if kind == "num":
            if len(value) > 30:
                raise ExprError("number too large", at)
            return int(value)
        if kind == "name":
            raw = lookup(value)
            if raw is None:
                raise ExprError(f"undefined variable {value!r} in expression", at)
            if len(raw) > 30:
                raise ExprError(f"variable {value} is too long to be a number", at)
            try:
                return int(raw.strip())
            except ValueError:
                try:
                    f = float(raw)
                except ValueError:
                    raise ExprError(f"variable {value} = {raw!r} is not a number", at) from None
                if f != f or f in (float("inf"), float("-inf")):
                    raise ExprError(f"variable {value} = {raw!r} is not a number", at) from None
                return int(f)
        if value == "(":
            result = additive(depth + 1)
            kind2, value2, at2 = advance()
            if value2 != ")":
                raise ExprError("expected ')'", at2)
            return result
        if value == "-":
            return -atom(depth + 1)
        if value == "+":
            return atom(depth + 1)
        raise ExprError("expected a number, a variable or '('", at)

    def term(depth: int) -> int:
        result = atom(depth)
        while peek()[1] in ("*", "/") and peek()[0] == "op":
            _, op, at = advance()
            rhs = atom(depth)
            if op == "*":
                result *= rhs
                if abs(result) > 10**30:
                    raise ExprError("expression value too large", at)
            else:
                if rhs == 0:
                    raise ExprError("division by zero", at)
                result //= rhs
        return result

    def additive(depth: int) -> int:
        result = term(depth)
        while peek()[1] in ("+", "-") and peek()[0] == "op":
            _, op, _ = advance()
            rhs = term(depth)
            result = result + rhs if op == "+" else result - rhs
            if abs(result) > 10**30:
                raise ExprError("expression value too large", peek()[2])
        return result

    if len(tokens) == 1:
        raise ExprError("empty expression", 0)
    value = additive(0)
    kind, rest, at = peek()
    if kind != "end":
        raise ExprError(f"unexpected {rest!r} in expression", at)
    return value


__all__ = ["ExprError", "evaluate"]
