"""The evaluator: variables, ``$name`` expansion and errors that point into the script.

What every command shares, whatever it does: the script's variables (and the
``-D`` defines that win over them), expanding ``$name`` with the limits that
keep it bounded, truth values for IF, the DEBUG and forLoopPrint switches, and
ScriptErrors that name the line, the column and the RUN chain. The
:class:`~netesto.script.interp.Interpreter` runs the blocks on top of it; the
command builders (:mod:`netesto.script.local`, :mod:`netesto.script.remote`)
read their arguments through it.
"""

from __future__ import annotations

import re

from netesto.errors import ScriptError
from netesto.script.actions import Location
from netesto.script.frame import Frame
from netesto.script.lexer import Line, Token
from netesto.script.parser import Command, error_at, suggest

VAR = re.compile(r"\$([A-Za-z0-9_]+)")
VARNAME = re.compile(r"^[A-Za-z0-9_]+$")
MAX_DEPTH = 64
MAX_EXPANSION = 100_000


class Evaluator:
    """Variables and their expansion, truth values, switches and located errors.

    ``defines`` seed the variables and are fixed: a script's own SET or SET_EXP
    of the same name leaves them as they are (as make's command-line variables).
    """

    def __init__(self, variables: dict[str, str], defines: dict[str, str] | None = None, *,
                 max_depth: int = MAX_DEPTH, max_expansion: int = MAX_EXPANSION,
                 for_loop_print: bool = False) -> None:
        self.variables = variables
        for key, value in (defines or {}).items():
            if not VARNAME.match(key):
                raise ScriptError(f"bad variable name {key!r} in defines",
                                  file="<defines>", hint="letters, digits and _ only")
            self.variables[key] = str(value)
        # -D wins over the script's own SET/SET_EXP of the same name (as make's command-line
        # variables do): `netesto plan two.nts -D dur=5` must not be undone by `SET dur=20`.
        self.fixed = frozenset(defines or ())
        self.max_depth = max_depth
        self.max_expansion = max_expansion
        self.for_loop_print = for_loop_print
        self.debug = False
        self.debug_saved = False
        # Converted argument values per (command, argument, text): pure, so cached.
        self.value_cache: dict[tuple[str, str, str], object] = {}

    def assign(self, name: str, value: str) -> None:
        """``SET name=value`` (a fixed define keeps its value)."""
        if name not in self.fixed:
            self.variables[name] = value

    def lookup(self, name: str, frame: Frame | None = None) -> str | None:
        if frame is not None and frame.args is not None and name in frame.args:
            return frame.args[name]
        return self.variables.get(name)

    def err(self, frame: Frame, line: Line, col: int, message: str, hint: str = "") -> ScriptError:
        """A ScriptError at ``line``:``col``, its hint ending with the RUN chain."""
        if frame.stack:
            frames = list(reversed(frame.stack))
            if len(frames) > 6:
                frames = frames[:3] + [f"... {len(frames) - 6} more ..."] + frames[-3:]
            chain = "called from " + " <- ".join(frames)
            hint = f"{hint}\n    {chain}" if hint else chain
        return error_at(line, col, message, hint)

    def loc(self, node: Command, frame: Frame) -> Location:
        """The Location an action of ``node`` carries."""
        line = node.line
        return Location(line.file, line.lineno, node.col, line.text, frame.stack)

    def sub(self, text: str, frame: Frame, line: Line, col: int) -> str:
        """``text`` (which stands at column ``col``) with its ``$names`` expanded.

        A name that is not defined is an error at its own column: nothing is
        left as written for a later command to take for something else.
        """
        first = text.find("$")
        if first < 0:
            return text
        if text.find("$", first + 1) < 0:
            # Fast path (most arguments): one reference to a plain value.
            m = VAR.match(text, first)
            if m is None:
                return text
            name = m.group(1)
            args = frame.args
            value = args[name] if args is not None and name in args else self.variables.get(name)
            if value is None:
                raise self.undefined_at(name, frame, line, col + first)
            if "$" not in value:
                if len(value) + len(text) > self.max_expansion:
                    raise self.err(frame, line, col,
                                   f"variable expansion exceeds {self.max_expansion} characters",
                                   "a value that keeps growing (SET a=x$a in a loop?)")
                return text[:first] + value + text[m.end():]
        budget = [self.max_expansion]

        def expand(m: "re.Match[str]", seen: tuple[str, ...], at: int) -> str:
            name = m.group(1)
            value = self.lookup(name, frame)
            if value is None:
                raise self.undefined_at(name, frame, line, at, seen)
            if name in seen:
                cycle = " -> ".join("$" + n for n in seen + (name,))
                raise self.err(frame, line, col, f"variable ${name} refers to itself ({cycle})",
                               "a variable's value cannot use the variable")
            if "$" in value:
                inner = seen + (name,)
                if len(inner) > self.max_depth:
                    raise self.err(frame, line, col, "variables nest too deeply")
                value = VAR.sub(lambda mm: expand(mm, inner, at), value)
            budget[0] -= len(value)
            if budget[0] < 0:
                raise self.err(frame, line, col,
                               f"variable expansion exceeds {self.max_expansion} characters",
                               "values that repeat other variables grow exponentially")
            return value

        return VAR.sub(lambda m: expand(m, (), col + m.start()), text)

    def undefined_at(self, name: str, frame: Frame, line: Line, col: int,
                     within: tuple[str, ...] = ()) -> ScriptError:
        """The error for ``$name`` undefined at ``line``:``col``.

        Inside a macro that takes ``name`` as a parameter, the RUN did not give
        it: the error stands at that RUN, naming the argument to pass there.
        """
        macro, call, parent = frame.macro, frame.call, frame.parent
        if not within and macro is not None and call is not None and parent is not None \
                and macro.takes(name):
            where = f"{line.file}:{line.lineno}:{col}"
            if macro.params is None:
                hint = f"{macro.name} reads ${name} at {where}: pass {name}=... to RUN, or SET {name} first"
            else:
                decl = macro.line
                hint = (f"pass {name}=... to RUN, or SET {name} first ({macro.name}, "
                        f"{decl.file}:{decl.lineno}, declares {name}? and reads it at {where})")
            return self.err(parent, call[0], call[1], f"RUN {macro.name}: missing argument {name}", hint)
        message = f"undefined variable ${name}"
        if within:
            message += f" (in the value of ${within[-1]})"
        known = list(self.variables) + list(frame.args or ())
        hint = suggest(name, known) or (f"SET it before RUN {macro.name}" if macro is not None else "SET it first")
        return self.err(frame, line, col, message, hint)

    def undefined(self, value: str, frame: Frame, line: Line, col: int) -> None:
        """Refuse ``value`` if a ``$name`` in it is still unexpanded (one that expansion
        put together from pieces: ``sub`` refuses the others where they stand)."""
        if "$" not in value:
            return
        m = VAR.search(value)
        if m:
            raise self.undefined_at(m.group(1), frame, line, col)

    def tokens(self, node: Command, frame: Frame) -> list[Token]:
        """``node``'s argument words, expanded (a value with spaces makes several words)."""
        out: list[Token] = []
        for tok in node.args:
            text = tok.text
            if "$" in text:
                text = self.sub(text, frame, node.line, tok.col)
                parts = text.split()
                if len(parts) != 1 or parts[0] != text:
                    out.extend(Token(part, tok.col) for part in parts)
                    continue
                out.append(Token(text, tok.col))
            else:
                out.append(tok)
        return out

    @staticmethod
    def truthy(value: str) -> bool:
        """IF's truth: a number is true unless 0; other text is true; empty is false."""
        value = value.strip()
        if not value:
            return False
        try:
            return float(value) != 0
        except ValueError:
            return True


__all__ = ["Evaluator", "MAX_DEPTH", "MAX_EXPANSION", "VAR", "VARNAME"]
