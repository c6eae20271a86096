"""Interpreter: runs the AST and yields Actions lazily, one command at a time.

Being a generator matters: the controller consumes actions while the
experiment runs, so ``exp=COUNTER`` reads and bumps the counter file at the
moment the original would have. Everything is bounded (FOR iterations, macro
depth, variable expansion, statements and actions), so no script can hang.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterable, Iterator, Mapping, TypeVar

from netesto.errors import ScriptError
from netesto.script import validate as V
from netesto.script.actions import (
    Action,
    Debug,
    DoClient,
    DoServer,
    Echo,
    GetData,
    Location,
    ProcessExp,
    RandWait,
    Wait,
)
from netesto.script.expr import ExprError, evaluate
from netesto.script.lexer import Line, Token
from netesto.script.parser import (
    COMMANDS,
    SIMPLE_COMMANDS,
    Command,
    End,
    For,
    If,
    IfDef,
    Macro,
    Node,
    error_at,
    parse,
    suggest,
)
from netesto.script.frame import Frame as _Frame
from netesto.script.remote import ARGS, MAX_SECONDS, RemoteCommands
from netesto.script.store import Counter, FileLoader, Loader, MemoryCounter, read_script

_VAR = re.compile(r"\$([A-Za-z0-9_]+)")
_VARNAME = re.compile(r"^[A-Za-z0-9_]+$")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:,(-?\d+))?$")

MAX_FOR_ITERATIONS = 100_000
MAX_DEPTH = 64
MAX_EXPANSION = 100_000
MAX_STEPS = 2_000_000
MAX_ACTIONS = 1_000_000

# Accepted spellings -> the original's argument names.
ALIASES = {
    "exp_name": "expName",
    "expname": "expName",
    "local_buffer": "localBuffer",
    "remote_buffer": "remoteBuffer",
}


@dataclass(frozen=True, repr=False)
class State:
    """What scripts run so far defined, for the next script of a session (a notebook's
    cells): variables, macros, the files SOURCE loaded, HOST_SUFFIX, DESC, OTHER and
    forLoopPrint. Immutable: an interpreter started from it works on its own copy.

    Experiment bookkeeping (the last host, exp and expName, DO_CLIENT groups) is not
    part of it: each run starts its experiments afresh from the counter.
    """

    variables: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    macros: Mapping[str, Macro] = field(default_factory=lambda: MappingProxyType({}))
    sourced: frozenset[str] = frozenset()
    host_suffix: str | None = None  # set by HOST_SUFFIX; None: the interpreter's own (the lab's)
    desc: str = ""
    other: tuple[tuple[str, str], ...] = ()
    for_loop_print: bool = False

    def __repr__(self) -> str:  # the macros' syntax trees would fill a screen
        return (f"State({len(self.variables)} variables, {len(self.macros)} macros, "
                f"{len(self.sourced)} files sourced)")


class _Stop(Exception):
    """END executed: finish the script cleanly."""


class Interpreter(RemoteCommands):
    """Runs Netesto scripts, yielding :mod:`netesto.script.actions` objects.

    ``loader`` resolves SOURCE (default: :class:`FileLoader`), ``counter``
    serves ``exp=COUNTER`` (default: a :class:`MemoryCounter` from 0),
    ``defines`` seeds global variables, ``host_suffix`` is the initial
    HOST_SUFFIX; the ``max_*`` limits bound every run (exceeding one is a
    ScriptError). State (variables, macros, HOST_SUFFIX, last host/exp/expName)
    persists across ``run_text`` calls on the same interpreter, like lines
    typed one after another into the original controller. ``state`` (from
    :meth:`state`) starts it with what earlier scripts defined; ``defines`` and
    ``host_suffix`` then apply on top, except that a HOST_SUFFIX in ``state`` wins.
    """

    def __init__(
        self,
        loader: Loader | None = None,
        counter: Counter | None = None,
        defines: dict[str, str] | None = None,
        max_steps: int = MAX_STEPS,
        *,
        max_actions: int = MAX_ACTIONS,
        max_loops: int = MAX_FOR_ITERATIONS,
        max_depth: int = MAX_DEPTH,
        max_expansion: int = MAX_EXPANSION,
        host_suffix: str = "",
        state: State | None = None,
    ) -> None:
        self.loader: Loader = loader if loader is not None else FileLoader()
        self.counter: Counter = counter if counter is not None else MemoryCounter()
        start = state if state is not None else State()
        self.variables: dict[str, str] = dict(start.variables)
        for key, value in (defines or {}).items():
            if not _VARNAME.match(key):
                raise ScriptError(f"bad variable name {key!r} in defines",
                                  file="<defines>", hint="letters, digits and _ only")
            self.variables[key] = str(value)
        # -D wins over the script's own SET/SET_EXP of the same name (as make's command-line
        # variables do): `netesto plan two.nts -D dur=5` must not be undone by `SET dur=20`.
        self.fixed = frozenset(defines or ())
        self.macros: dict[str, Macro] = dict(start.macros)
        self.sourced: set[str] = set(start.sourced)
        self._suffix_set = start.host_suffix is not None  # by a HOST_SUFFIX command
        self.host_suffix = start.host_suffix if start.host_suffix is not None else host_suffix.lstrip(".")
        self.last_host = ""
        self.last_exp: int | None = None
        self.last_exp_name = "Exp"
        self.desc = start.desc
        self.other: tuple[tuple[str, str], ...] = start.other
        self.debug = False
        self._debug_saved = False
        self.for_loop_print = start.for_loop_print
        self._group_exp: int | None = None
        self._group_next = 1
        self._fetched: set[tuple[str, int]] = set()
        self._pairs: dict[tuple[int, str, str, int], str] = {}  # (exp, host, server, group) -> file:line
        self.max_steps = max_steps
        self.max_actions = max_actions
        self.max_loops = max_loops
        self.max_depth = max_depth
        self.max_expansion = max_expansion
        # Converted argument values per (command, argument, text): pure, so cached.
        self._value_cache: dict[tuple[str, str, str], object] = {}
        self.steps = 0
        self._where: tuple[Node, _Frame] | None = None  # the command being run (for RecursionError)
        self.loops = 0
        self.actions = 0
        self.ended = False

    # ----- public API

    def state(self) -> State:
        """A snapshot of what the scripts run so far defined (see :class:`State`)."""
        return State(variables=MappingProxyType(dict(self.variables)),
                     macros=MappingProxyType(dict(self.macros)), sourced=frozenset(self.sourced),
                     host_suffix=self.host_suffix if self._suffix_set else None,
                     desc=self.desc, other=self.other, for_loop_print=self.for_loop_print)

    def run_text(self, text: str, file: str = "<script>",
                 base_dir: str | None = None) -> Iterator[Action]:
        """Parse ``text`` now (syntax errors raise here) and return a lazy action stream."""
        nodes = parse(text, file)
        self.ended = False  # END stops one script, not the interpreter for good
        if base_dir is None and not file.startswith("<"):
            base_dir = str(Path(file).parent)
        return self._run(nodes, _Frame(None, (), base_dir))

    def run_file(self, path: str | Path) -> Iterator[Action]:
        """Run a script file (SOURCE names resolve next to it first)."""
        p = Path(path)
        text = read_script(p)
        self.sourced.add(str(p.resolve()))
        return self.run_text(text, file=str(p), base_dir=str(p.parent))

    # ----- execution

    def _run(self, nodes: tuple[Node, ...], frame: _Frame) -> Iterator[Action]:
        try:
            for action in self._block(nodes, frame):
                self.actions += 1
                if self.actions > self.max_actions:
                    raise ScriptError(
                        f"script produced more than {self.max_actions} actions",
                        file=action.loc.file, line=action.loc.line, column=action.loc.column,
                        text=action.loc.text, hint="raise max_actions if this is intended")
                yield action
        except _Stop:
            self.ended = True
        except RecursionError as exc:
            # Each cap (RUN depth, FOR nesting) holds, but together they can pass
            # Python's limit: report the command that was running when it did.
            where = self._where
            if where is None:
                raise ScriptError("script nests too deeply") from exc
            node, at = where
            raise self._err(at, node.line, node.col, "script nests too deeply for Python",
                            "fewer nested RUNs and FORs") from exc

    def _block(self, nodes: Iterable[Node], frame: _Frame) -> Iterator[Action]:
        for node in nodes:
            self._where = (node, frame)
            self.steps += 1
            if self.steps > self.max_steps:
                raise self._cap(frame, node, f"script ran more than {self.max_steps} commands",
                                "an endless loop? raise max_steps if this is intended")
            if type(node) is Command:
                yield from self._command(node, frame)
            elif type(node) is For:
                yield from self._for(node, frame)
            elif type(node) is If:
                if self._truthy(self._sub(node.cond.text, frame, node.line, node.cond.col)):
                    yield from self._block((node.body,), frame)
            elif type(node) is IfDef:
                yield from self._ifdef(node, frame)
            elif type(node) is Macro:
                self.macros[node.name] = node
            elif type(node) is End:
                self.counter.round_up()
                raise _Stop()

    def _err(self, frame: _Frame, line: Line, col: int, message: str,
             hint: str = "") -> ScriptError:
        if frame.stack:
            frames = list(reversed(frame.stack))
            if len(frames) > 6:
                frames = frames[:3] + [f"... {len(frames) - 6} more ..."] + frames[-3:]
            chain = "called from " + " <- ".join(frames)
            hint = f"{hint}\n    {chain}" if hint else chain
        return error_at(line, col, message, hint)

    def _cap(self, frame: _Frame, node: Node, message: str, hint: str) -> ScriptError:
        """A hang guard (command steps, FOR iterations) tripped at ``node``."""
        return self._err(frame, node.line, node.col, message, hint)

    def _loc(self, node: Command, frame: _Frame) -> Location:
        line = node.line
        return Location(line.file, line.lineno, node.col, line.text, frame.stack)

    # ----- variables

    def lookup(self, name: str, frame: _Frame | None = None) -> str | None:
        if frame is not None and frame.args is not None and name in frame.args:
            return frame.args[name]
        return self.variables.get(name)

    def _sub(self, text: str, frame: _Frame, line: Line, col: int) -> str:
        first = text.find("$")
        if first < 0:
            return text
        if text.find("$", first + 1) < 0:
            # Fast path (most arguments): one reference to a plain value.
            m = _VAR.match(text, first)
            if m is None:
                return text
            name = m.group(1)
            args = frame.args
            value = args[name] if args is not None and name in args else self.variables.get(name)
            if value is None:
                return text
            if "$" not in value:
                if len(value) + len(text) > self.max_expansion:
                    raise self._err(frame, line, col,
                                    f"variable expansion exceeds {self.max_expansion} characters",
                                    "a value that keeps growing (SET a=x$a in a loop?)")
                return text[:first] + value + text[m.end():]
        budget = [self.max_expansion]

        def expand(m: "re.Match[str]", seen: tuple[str, ...]) -> str:
            name = m.group(1)
            value = self.lookup(name, frame)
            if value is None:
                return m.group(0)
            if name in seen:
                cycle = " -> ".join("$" + n for n in seen + (name,))
                raise self._err(frame, line, col, f"variable ${name} refers to itself ({cycle})",
                                "a variable's value cannot use the variable")
            if "$" in value:
                inner = seen + (name,)
                if len(inner) > self.max_depth:
                    raise self._err(frame, line, col, "variables nest too deeply")
                value = _VAR.sub(lambda mm: expand(mm, inner), value)
            budget[0] -= len(value)
            if budget[0] < 0:
                raise self._err(frame, line, col,
                                f"variable expansion exceeds {self.max_expansion} characters",
                                "values that repeat other variables grow exponentially")
            return value

        return _VAR.sub(lambda m: expand(m, ()), text)

    def _undefined(self, value: str, frame: _Frame, line: Line, col: int) -> None:
        if "$" not in value:
            return
        m = _VAR.search(value)
        if m:
            known = list(self.variables) + list(frame.args or ())
            raise self._err(frame, line, col, f"undefined variable ${m.group(1)}",
                            suggest(m.group(1), known) or "SET it first, or pass it to RUN")

    def _tokens(self, node: Command, frame: _Frame) -> list[Token]:
        out: list[Token] = []
        for tok in node.args:
            text = tok.text
            if "$" in text:
                text = self._sub(text, frame, node.line, tok.col)
                parts = text.split()
                if len(parts) != 1 or parts[0] != text:
                    out.extend(Token(part, tok.col) for part in parts)
                    continue
                out.append(Token(text, tok.col))
            else:
                out.append(tok)
        return out

    def _kv(self, node: Command, frame: _Frame, name: str,
            allowed: tuple[str, ...] | None) -> dict[str, tuple[str, Token]]:
        """``key=value`` arguments, checked against ``allowed`` (None = any key)."""
        out: dict[str, tuple[str, Token]] = {}
        for tok in self._tokens(node, frame):
            key, eq, value = tok.text.partition("=")
            if not eq or not key:
                raise self._err(frame, node.line, tok.col,
                                f"{name}: expected key=value, got {tok.text!r}",
                                "arguments are key=value words without spaces")
            key = ALIASES.get(key, key)
            if allowed is not None and key not in allowed:
                raise self._err(frame, node.line, tok.col,
                                f"{name}: unknown argument {key!r}",
                                suggest(key, allowed) or "arguments: " + ", ".join(allowed))
            if key in out:
                raise self._err(frame, node.line, tok.col, f"{name}: {key} given twice",
                                f"the first is at column {out[key][1].col}")
            out[key] = (value, tok)
        return out

    # ----- structure

    def _truthy(self, value: str) -> bool:
        value = value.strip()
        if not value or _VAR.search(value):
            return False  # undefined variable (still $name) is false
        try:
            return float(value) != 0
        except ValueError:
            return True

    def _ifdef(self, node: IfDef, frame: _Frame) -> Iterator[Action]:
        name = node.name.text
        if name.startswith("$"):
            var = name[1:]
            defined = self.lookup(var, frame) is not None
        else:
            defined = self._sub(name, frame, node.line, node.name.col) in self.macros
        if defined:
            yield from self._block((node.body,), frame)

    def _for(self, node: For, frame: _Frame) -> Iterator[Action]:
        text = self._sub(node.items.text, frame, node.line, node.items.col)
        self._undefined(text, frame, node.line, node.items.col)
        items = self._for_items(text, node, frame)
        for value in items:
            self.loops += 1
            if self.loops > self.max_loops:
                raise self._cap(frame, node, f"more than {self.max_loops} FOR iterations in total",
                                "the original's cap; split the script or shorten the lists")
            self.variables[node.var] = value
            if self.for_loop_print:
                yield Echo(loc=Location(node.line.file, node.line.lineno, node.col,
                                        node.line.text, frame.stack),
                           text=f"FOR {node.var}={value}")
            yield from self._block(node.body, frame)

    def _for_items(self, text: str, node: For, frame: _Frame) -> list[str]:
        m = _RANGE.match(text)
        if m:
            if len(text) > 60:  # also keeps int() clear of Python's 4300-digit limit
                raise self._err(frame, node.line, node.items.col,
                                f"FOR range {text[:40]}... has numbers too large to loop over")
            low, high = int(m.group(1)), int(m.group(2))
            step = int(m.group(3)) if m.group(3) else 1
            if step <= 0:
                raise self._err(frame, node.line, node.items.col,
                                f"FOR range step must be positive, got {step}",
                                "a descending range counts down by the step: 10..1,2")
            count = abs(high - low) // step + 1
            if count > self.max_loops - self.loops:
                raise self._err(frame, node.line, node.items.col,
                                f"FOR range {text} ({count} items) would pass the cap of "
                                f"{self.max_loops} FOR iterations in total "
                                f"({self.loops} used so far)")
            sign = 1 if high >= low else -1
            return [str(low + sign * step * i) for i in range(count)]
        return [item for item in text.split(",") if item != ""]

    # ----- commands

    def _command(self, node: Command, frame: _Frame) -> Iterator[Action]:
        name = node.name
        if name.startswith("$"):
            resolved = self._sub(name, frame, node.line, node.col).split()
            if not resolved or resolved[0] not in SIMPLE_COMMANDS:
                word = resolved[0] if resolved else ""
                raise self._err(frame, node.line, node.col,
                                f"{name} expands to {word!r}, which is not a command",
                                suggest(word, SIMPLE_COMMANDS))
            extra = tuple(Token(t, node.col) for t in resolved[1:])
            node = Command(node.line, node.col, resolved[0], extra + node.args, node.rest)
            name = node.name
        handler = _HANDLERS[name]
        result = handler(self, node, frame)
        if result is not None:
            yield from result

    def _value(self, frame: _Frame, node: Command, name: str, key: str, raw: str,
               tok: Token, conv: Callable[[str], _T]) -> _T:
        self._undefined(raw, frame, node.line, tok.col)
        try:
            return conv(raw)
        except ValueError as exc:
            raise self._err(frame, node.line, tok.col, f"{name}: bad {key}: {exc}") from None

    def _set(self, node: Command, frame: _Frame) -> None:
        toks = self._tokens(node, frame)
        if len(toks) != 1 or "=" not in toks[0].text:
            col = toks[1].col if len(toks) > 1 else node.col
            raise self._err(frame, node.line, col, "SET takes one name=value",
                            "values cannot contain spaces; e.g. SET dur=60")
        key, _, value = toks[0].text.partition("=")
        if not _VARNAME.match(key):
            raise self._err(frame, node.line, toks[0].col, f"bad variable name {key!r}",
                            "letters, digits and _ only")
        if key == "forLoopPrint":
            self.for_loop_print = self._truthy(value)
            return
        if key not in self.fixed:
            self.variables[key] = value

    def _set_exp(self, node: Command, frame: _Frame) -> None:
        toks = self._tokens(node, frame)
        if len(toks) != 1 or "=" not in toks[0].text:
            raise self._err(frame, node.line, node.col, "SET_EXP takes one name=expression",
                            "no spaces inside the expression, e.g. SET_EXP d=$dur/3+2")
        key, _, expr = toks[0].text.partition("=")
        if not _VARNAME.match(key):
            raise self._err(frame, node.line, toks[0].col, f"bad variable name {key!r}")
        try:
            value = evaluate(expr, lambda n: self.lookup(n, frame))
        except ExprError as exc:
            col = toks[0].col + len(key) + 1 + exc.pos
            raise self._err(frame, node.line, col, f"SET_EXP: {exc}",
                            "integers, variables, + - * / and parentheses") from None
        if key not in self.fixed:
            self.variables[key] = str(value)

    def _host_suffix(self, node: Command, frame: _Frame) -> None:
        toks = self._tokens(node, frame)
        if len(toks) > 1:
            raise self._err(frame, node.line, toks[1].col, "HOST_SUFFIX takes one suffix")
        suffix = toks[0].text.lstrip(".") if toks else ""
        if suffix.upper() == "NONE":
            suffix = ""
        if suffix:
            self._value(frame, node, "HOST_SUFFIX", "suffix", suffix, toks[0],
                        lambda s: V.word(s, "host suffix"))
        self.host_suffix = suffix
        self._suffix_set = True

    def _source(self, node: Command, frame: _Frame) -> Iterator[Action]:
        toks = self._tokens(node, frame)
        if len(toks) != 1:
            raise self._err(frame, node.line, node.col, "SOURCE takes one file name")
        name = toks[0].text
        try:
            key, display, text = self.loader.load(name, frame.base_dir)
        except LookupError as exc:
            searched = ", ".join(self.loader.searched(frame.base_dir))
            raise self._err(frame, node.line, toks[0].col, f"SOURCE: {exc.args[0]}",
                            f"searched: {searched}") from None
        if key in self.sourced:
            return
        if not _opens_like_a_script(text):
            # Say nothing of its content: SOURCE must not become a way to print files.
            raise self._err(frame, node.line, toks[0].col,
                            f"SOURCE: {display} is not a netesto script (its first line is not a command)")
        self.sourced.add(key)
        nodes = parse(text, display)
        base = str(Path(display).parent) if not display.startswith("<") and "/" in display else frame.base_dir
        yield from self._block(nodes, _Frame(frame.args, frame.stack, base))

    def _desc(self, node: Command, frame: _Frame) -> None:
        self.desc = self._sub(node.rest, frame, node.line, node.col)

    def _other(self, node: Command, frame: _Frame) -> None:
        text = self._sub(node.rest, frame, node.line, node.col).strip()
        pairs: list[tuple[str, str]] = []
        for item in filter(None, (p.strip() for p in text.split(","))):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise self._err(frame, node.line, node.col,
                                f"OTHER: expected key=value items, got {item!r}",
                                "e.g. OTHER netem=10,bw=100mbit")
            pairs.append((key.strip(), value.strip()))
        self.other = tuple(pairs)

    def _wait(self, node: Command, frame: _Frame) -> Iterator[Action]:
        toks = self._tokens(node, frame)
        if len(toks) != 1:
            raise self._err(frame, node.line, node.col, "WAIT takes one number of seconds")
        secs = self._value(frame, node, "WAIT", "seconds", toks[0].text, toks[0],
                           lambda s: V.to_float(s, low=0, high=MAX_SECONDS))
        yield Wait(loc=self._loc(node, frame), seconds=float(secs))

    def _rand_wait(self, node: Command, frame: _Frame) -> Iterator[Action]:
        toks = self._tokens(node, frame)
        if len(toks) not in (1, 2):
            raise self._err(frame, node.line, node.col, "RAND_WAIT takes 'max' or 'min max' seconds")
        nums = [float(self._value(frame, node, "RAND_WAIT", "seconds", t.text, t,
                                  lambda s: V.to_float(s, low=0, high=MAX_SECONDS))) for t in toks]
        low, high = (0.0, nums[0]) if len(nums) == 1 else (nums[0], nums[1])
        if high < low:
            raise self._err(frame, node.line, toks[-1].col,
                            f"RAND_WAIT: max {high:g} is below min {low:g}")
        yield RandWait(loc=self._loc(node, frame), low=low, high=high)

    def _echo(self, node: Command, frame: _Frame) -> Iterator[Action]:
        text = self._sub(node.rest, frame, node.line, node.col)
        self._undefined(text, frame, node.line, node.col)
        yield Echo(loc=self._loc(node, frame), text=text)

    def _debug(self, node: Command, frame: _Frame) -> Iterator[Action]:
        toks = self._tokens(node, frame)
        if node.name == "DEBUG":
            value = toks[0].text if len(toks) == 1 else ""
            if value.upper() in ("1", "T", "TRUE", "ON"):
                self.debug = True
            elif value.upper() in ("0", "F", "FALSE", "OFF"):
                self.debug = False
            else:
                raise self._err(frame, node.line, toks[0].col if toks else node.col,
                                f"DEBUG takes 0, 1, T or F, got {value!r}")
        elif toks:
            raise self._err(frame, node.line, toks[0].col, f"{node.name} takes no arguments")
        elif node.name == "DEBUG_DISABLE":
            self._debug_saved, self.debug = self.debug, False
        else:
            self.debug = self._debug_saved
        yield Debug(loc=self._loc(node, frame), enabled=self.debug)

    def _next_counter(self, node: Command, frame: _Frame) -> None:
        if node.args:
            raise self._err(frame, node.line, node.args[0].col, "NEXT_COUNTER takes no arguments")
        self.counter.round_up()

    def _noop(self, node: Command, frame: _Frame) -> None:
        self._kv(node, frame, node.name, ARGS[node.name])

    # ----- experiments and hosts

    def _run_macro(self, node: Command, frame: _Frame) -> Iterator[Action]:
        toks = self._tokens(node, frame)
        if not toks:
            raise self._err(frame, node.line, node.col, "RUN needs a macro name",
                            "RUN name[,reps] key=value ...")
        head = toks[0]
        name, comma, reps_text = head.text.partition(",")
        reps = 1
        if comma:
            reps = self._value(frame, node, "RUN", "repetitions", reps_text, head,
                               lambda s: V.to_int(s, low=0, high=self.max_loops))
        macro = self.macros.get(name)
        if macro is None:
            hint = suggest(name, list(self.macros))
            if not hint:
                hint = ("defined macros: " + ", ".join(sorted(self.macros))
                        if self.macros else "no macros defined; SOURCE inlib first?")
            raise self._err(frame, node.line, head.col, f"RUN: unknown macro {name!r}", hint)
        args: dict[str, str] = {}
        seen: dict[str, int] = {}
        for tok in toks[1:]:
            key, eq, value = tok.text.partition("=")
            if not eq or not _VARNAME.match(key):
                raise self._err(frame, node.line, tok.col,
                                f"RUN {name}: expected key=value, got {tok.text!r}")
            if key in seen:
                raise self._err(frame, node.line, tok.col, f"RUN {name}: {key} given twice",
                                f"the first is at column {seen[key]}")
            seen[key] = tok.col
            if value.startswith("$") and _VAR.fullmatch(value):
                # An undefined variable passed on (instances=$instances) counts as
                # not passed: inside the macro $instances then means the global, and
                # is reported as undefined only if the macro really uses it.
                continue
            args[key] = value
        depth = len(frame.stack) + 1
        if depth > self.max_depth:
            raise self._err(frame, node.line, node.col,
                            f"RUN {name}: macros nested more than {self.max_depth} deep",
                            "a macro that RUNs itself?")
        cas = [c for c in args.get("ca", "").split(",") if c] if "ca" in args else []
        where = f"RUN {name} at {node.line.file}:{node.line.lineno}"
        base = str(Path(macro.line.file).parent) if not macro.line.file.startswith("<") else frame.base_dir
        for _ in range(reps):
            for ca in (cas if len(cas) > 1 else [None]):
                self.steps += 1
                if self.steps > self.max_steps:
                    raise self._err(frame, node.line, node.col,
                                    f"script ran more than {self.max_steps} commands",
                                    "an endless loop? raise max_steps if this is intended")
                call_args = dict(args)
                if ca is not None:
                    call_args["ca"] = ca
                yield from self._block(macro.body, _Frame(call_args, frame.stack + (where,), base))


_T = TypeVar("_T")

_HANDLERS: dict[str, Callable[[Interpreter, Command, _Frame], Iterator[Action] | None]] = {
    "SET": Interpreter._set,
    "SET_EXP": Interpreter._set_exp,
    "HOST_SUFFIX": Interpreter._host_suffix,
    "SOURCE": Interpreter._source,
    "DESC": Interpreter._desc,
    "OTHER": Interpreter._other,
    "WAIT": Interpreter._wait,
    "RAND_WAIT": Interpreter._rand_wait,
    "ECHO": Interpreter._echo,
    "DEBUG": Interpreter._debug,
    "DEBUG_DISABLE": Interpreter._debug,
    "DEBUG_RESTORE": Interpreter._debug,
    "NEXT_COUNTER": Interpreter._next_counter,
    "PROCESS_EXP": Interpreter._process_exp,
    "RUN": Interpreter._run_macro,
    "DO_SERVER": Interpreter._do_server,
    "DO_CLIENT": Interpreter._do_client,
    "GET_DATA": Interpreter._get_data,
    "SET_SYSCTL": Interpreter._set_sysctl,
    "SET_MODULE_PARAMS": Interpreter._set_module_params,
    "SET_NETEM": Interpreter._set_netem,
    "SET_QDISC": Interpreter._set_qdisc,
    "DO_TCPDUMP": Interpreter._do_tcpdump,
    "CLOSE": Interpreter._noop,
    "EXIT": Interpreter._noop,
}


def _opens_like_a_script(text: str) -> bool:
    """Whether the first line that is not blank or a comment starts with a command word."""
    for line in text.splitlines():
        words = line.upper().split(None, 2)
        if not words or words[0].startswith("#"):
            continue
        joined = "_".join(words[:2])  # "DO SERVER" is read as DO_SERVER, as the parser does
        return words[0] in COMMANDS or joined in COMMANDS or words[0].startswith("$")
    return True


def estimate_seconds(actions: Iterable[Action]) -> float:
    """Wall time a plan needs: WAITs, the mean of each RAND_WAIT, and the waits the
    runner makes for flows (GET_DATA and DO_SERVER order=1 of a host wait until its
    flows have ended; the run ends after every flow, whose data it then fetches)."""
    t = 0.0
    ends: dict[tuple[int, str], float] = {}  # (exp, host) -> end of its last flow
    exp_ends: dict[int, float] = {}
    last = 0.0
    for action in actions:
        if isinstance(action, Wait):
            t += action.seconds
        elif isinstance(action, RandWait):
            t += (action.low + action.high) / 2
        elif isinstance(action, DoClient):
            end = t + action.delay + action.dur
            for host in (action.host, action.server):
                ends[(action.exp, host)] = max(ends.get((action.exp, host), 0.0), end)
            exp_ends[action.exp] = max(exp_ends.get(action.exp, 0.0), end)
            last = max(last, end)
        elif isinstance(action, GetData) or (isinstance(action, DoServer) and action.order >= 1):
            t = max(t, ends.get((action.exp, action.host), 0.0))
        elif isinstance(action, ProcessExp):
            t = max(t, exp_ends.get(action.exp, 0.0))
    return max(t, last)


def plan(text: str, *, file: str = "<script>", **kw: object) -> list[Action]:
    """All actions of a script, eagerly (a MemoryCounter unless ``counter=`` is given)."""
    return list(Interpreter(**kw).run_text(text, file=file))  # type: ignore[arg-type]


__all__ = ["Interpreter", "State", "estimate_seconds", "plan"]
