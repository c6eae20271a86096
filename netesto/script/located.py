"""A command's ``key=value`` arguments with where each one stands in the script.

A builder asks :class:`Args` for a value converted (``args.get("dur", "20",
to_float)``) and gets it checked, cached, and on a bad value a ScriptError
pointing at that argument: ``DO_CLIENT: bad dur: ...`` at its column, with
the RUN chain it was called through.
"""

from __future__ import annotations

from typing import Callable, Iterator, TypeVar, cast

from netesto.errors import ScriptError
from netesto.script.actions import Location
from netesto.script.evaluator import Evaluator
from netesto.script.frame import Frame
from netesto.script.lexer import Token
from netesto.script.parser import Command, suggest

# Accepted spellings -> the original's argument names.
ALIASES = {
    "exp_name": "expName",
    "expname": "expName",
    "local_buffer": "localBuffer",
    "remote_buffer": "remoteBuffer",
}
_MISSING = object()
_CACHE_LIMIT = 20_000
_T = TypeVar("_T")


class Site:
    """Where a command runs (its node and RUN frame): located errors and conversions."""

    __slots__ = ("ev", "node", "frame", "name")

    def __init__(self, ev: Evaluator, node: Command, frame: Frame, name: str = "") -> None:
        self.ev = ev
        self.node = node
        self.frame = frame
        self.name = name or node.name

    @property
    def loc(self) -> Location:
        """Where the command stands, for the action it makes."""
        return self.ev.loc(self.node, self.frame)

    def error(self, message: str, hint: str = "", *, col: int | None = None) -> ScriptError:
        """A ScriptError at column ``col`` (default: the command's first word)."""
        return self.ev.err(self.frame, self.node.line, col if col is not None else self.node.col,
                           message, hint)

    def rest(self) -> str:
        """The text after the command word (DESC, OTHER, ECHO keep it whole), expanded."""
        node = self.node
        text = node.line.text
        start = node.col - 1
        after = start + len(text[start:].split(None, 1)[0]) if text[start:].strip() else start
        col = text.find(node.rest, after) + 1 if node.rest else 0
        return self.ev.sub(node.rest, self.frame, node.line, col if col > 0 else node.col)

    def convert(self, key: str, raw: str, col: int, conv: Callable[[str], _T]) -> _T:
        """``conv(raw)``, its ValueError a ScriptError ``NAME: bad key: ...`` at ``col``."""
        self.ev.undefined(raw, self.frame, self.node.line, col)
        try:
            return conv(raw)
        except ValueError as exc:
            raise self.error(f"{self.name}: bad {key}: {exc}", col=col) from None


class Args(Site):
    """The ``key=value`` arguments of one run of a command: ``key -> (text, token)``,
    expanded, checked against ``allowed`` (None: any key), each converted value
    cached per text."""

    __slots__ = ("items",)

    def __init__(self, ev: Evaluator, node: Command, frame: Frame,
                 allowed: tuple[str, ...] | None, name: str = "") -> None:
        super().__init__(ev, node, frame, name)
        self.items: dict[str, tuple[str, Token]] = {}
        for tok in ev.tokens(node, frame):
            key, eq, value = tok.text.partition("=")
            if not eq or not key:
                raise self.error(f"{self.name}: expected key=value, got {tok.text!r}",
                                 "arguments are key=value words without spaces", col=tok.col)
            key = ALIASES.get(key, key)
            if allowed is not None and key not in allowed:
                raise self.error(f"{self.name}: unknown argument {key!r}",
                                 suggest(key, allowed) or "arguments: " + ", ".join(allowed), col=tok.col)
            if key in self.items:
                raise self.error(f"{self.name}: {key} given twice",
                                 f"the first is at column {self.items[key][1].col}", col=tok.col)
            self.items[key] = (value, tok)

    def __contains__(self, key: str) -> bool:
        return key in self.items

    def __iter__(self) -> Iterator[tuple[str, str, Token]]:
        """``(key, text, token)`` in the order written."""
        return ((key, raw, tok) for key, (raw, tok) in self.items.items())

    def raw(self, key: str) -> str:
        return self.items[key][0]

    def col(self, key: str | None = None) -> int:
        """The column of ``key``'s word (of the command when it is not given)."""
        if key is not None and key in self.items:
            return self.items[key][1].col
        return self.node.col

    def error_at(self, key: str, message: str, hint: str = "") -> ScriptError:
        """A ScriptError at ``key``'s argument (at the command when it was not given)."""
        return self.error(message, hint, col=self.col(key))

    def defined(self, key: str) -> str:
        """``key``'s text, refused if a ``$name`` in it is undefined."""
        raw, tok = self.items[key]
        self.ev.undefined(raw, self.frame, self.node.line, tok.col)
        return raw

    def check(self, key: str, conv: Callable[[str], _T]) -> _T:
        """``key``'s value converted (uncached: for checks of words kept as written)."""
        raw, tok = self.items[key]
        return self.convert(key, raw, tok.col, conv)

    def get(self, key: str, default: str, conv: Callable[[str], _T]) -> _T:
        """``key``'s value (``default`` when not given) converted by ``conv``.

        Conversions of a given (command, argument, text) never change: they are cached.
        """
        cache = self.ev.value_cache
        if key not in self.items:
            cache_key = (self.node.name, key, default)
            if cache_key not in cache:
                cache[cache_key] = conv(default)
            return cast(_T, cache[cache_key])
        raw, tok = self.items[key]
        cache_key = (self.node.name, key, raw)
        value = cache.get(cache_key, _MISSING)
        if value is _MISSING:
            value = self.convert(key, raw, tok.col, conv)
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
            cache[cache_key] = value
        return cast(_T, value)


__all__ = ["ALIASES", "Args", "Site"]
