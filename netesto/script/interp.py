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
from typing import Callable, Iterable, Iterator, Mapping, TypeVar, cast

from netesto.errors import ScriptError
from netesto.policy import MAX_EXP, MAX_FLOW_SECONDS, qdisc_other_words
from netesto.script import validate as V
from netesto.script.actions import (
    DRIVERS,
    TEST_TYPES,
    Action,
    Debug,
    DoClient,
    DoServer,
    DoTcpdump,
    Echo,
    GetData,
    Location,
    ProcessExp,
    RandWait,
    SetModuleParams,
    SetNetem,
    SetQdisc,
    SetSysctl,
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
from netesto.script.store import Counter, FileLoader, Loader, MemoryCounter, read_script

_VAR = re.compile(r"\$([A-Za-z0-9_]+)")
_VARNAME = re.compile(r"^[A-Za-z0-9_]+$")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:,(-?\d+))?$")
_STREAM_REQ = frozenset({"S", "s", "STREAM", "stream"})
_TCP_STREAMS = frozenset({"TCP_STREAM", "TCP_MAERTS", "TCP_BIDIR"})

MAX_FOR_ITERATIONS = 100_000
MAX_DEPTH = 64
MAX_EXPANSION = 100_000
MAX_STEPS = 2_000_000
MAX_ACTIONS = 1_000_000
MAX_SECONDS = 7 * 86400.0  # longest WAIT, dur or delay accepted

COMMON = ("exp", "host", "expName")
# Accepted spellings -> the original's argument names.
ALIASES = {
    "exp_name": "expName",
    "expname": "expName",
    "local_buffer": "localBuffer",
    "remote_buffer": "remoteBuffer",
}
ARGS: dict[str, tuple[str, ...]] = {
    "DO_SERVER": COMMON + ("order", "start"),
    "DO_CLIENT": COMMON + (
        "server", "ca", "dur", "delay", "instances", "req", "reply", "stats",
        "localBuffer", "remoteBuffer", "test", "group", "driver", "pacing", "rate", "interval",
    ),
    "GET_DATA": COMMON,
    "SET_NETEM": COMMON + ("netem_delay", "delay", "limit", "loss", "jitter", "rate"),
    "SET_QDISC": COMMON + ("qdisc", "action", "rate", "burst", "limit", "other"),
    "DO_TCPDUMP": COMMON + ("server", "packets"),
    "PROCESS_EXP": ("exp", "expName"),
    "CLOSE": ("host",),
    "EXIT": ("host",),
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


class _Frame:
    """One RUN invocation (or the top level): its arguments and call chain."""

    __slots__ = ("args", "stack", "base_dir")

    def __init__(self, args: dict[str, str] | None, stack: tuple[str, ...],
                 base_dir: str | None) -> None:
        self.args = args
        self.stack = stack
        self.base_dir = base_dir


class Interpreter:
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

    def _exp(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]],
             *, consume: bool = True) -> int:
        if "exp" in args:
            raw, tok = args["exp"]
            self._undefined(raw, frame, node.line, tok.col)
            if raw in ("COUNTER", "counter"):
                value = self._counter_take(frame, node, tok.col)
            elif raw in ("PREV", "prev"):
                if self.last_exp is None:
                    raise self._err(frame, node.line, tok.col,
                                    "exp=PREV but there is no previous experiment",
                                    "use exp=COUNTER for the first command of an experiment")
                value = self.last_exp
            else:
                value = self._value(frame, node, node.name, "exp", raw, tok,
                                    lambda s: V.to_int(s, low=0, high=MAX_EXP))
        elif self.last_exp is not None:
            value = self.last_exp
        elif consume:
            value = self._counter_take(frame, node, node.col)
        else:
            return 0
        self.last_exp = value
        return value

    def _counter_take(self, frame: _Frame, node: Command, col: int) -> int:
        value = self.counter.take()
        if not 0 <= value <= MAX_EXP:
            raise self._err(frame, node.line, col,
                            f"{node.name}: experiment number {value} from the counter is not in 0..{MAX_EXP}",
                            "reset the counter file (or give exp=N)")
        return value

    def _qualify(self, host: str) -> str:
        if self.host_suffix and "." not in host and ":" not in host:
            return f"{host}.{self.host_suffix}"
        return host

    def _host(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]],
              key: str = "host") -> str:
        if key in args:
            raw, tok = args[key]
            self._value(frame, node, node.name, key, raw, tok, lambda s: V.word(s, "host name"))
            host = self._qualify(raw)
            self.last_host = host
            return host
        if not self.last_host:
            raise self._err(frame, node.line, node.col, f"{node.name}: host= is required",
                            "no earlier command named a host")
        return self.last_host

    def _exp_name(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]]) -> str:
        if "expName" in args:
            raw, tok = args["expName"]
            self._value(frame, node, node.name, "expName", raw, tok,
                        lambda s: V.name(s, "expName"))
            self.last_exp_name = raw
        return self.last_exp_name

    def _get(self, frame: _Frame, node: Command, args: dict[str, tuple[str, Token]],
             key: str, default: str, conv: Callable[[str], _T]) -> _T:
        if key not in args:
            cache_key = (node.name, key, default)
            if cache_key not in self._value_cache:
                self._value_cache[cache_key] = conv(default)
            return cast(_T, self._value_cache[cache_key])
        raw, tok = args[key]
        # Conversions of a given (command, argument, text) never change: cache them.
        cache_key = (node.name, key, raw)
        value = self._value_cache.get(cache_key, _MISSING)
        if value is _MISSING:
            value = self._value(frame, node, node.name, key, raw, tok, conv)
            if len(self._value_cache) > 20_000:
                self._value_cache.clear()
            self._value_cache[cache_key] = value
        return cast(_T, value)

    def _remote_common(self, node: Command, frame: _Frame, *, consume: bool = True,
                       open_args: bool = False) -> tuple[dict[str, tuple[str, Token]], str, int, str]:
        """The arguments, host, exp and expName of a command run on a host.
        ``open_args``: any key is accepted (sysctl names, module parameters)."""
        args = self._kv(node, frame, node.name, None if open_args else ARGS[node.name])
        common = {k: v for k, v in args.items() if k in COMMON} if open_args else args
        host = self._host(frame, node, common)
        exp = self._exp(frame, node, common, consume=consume)
        exp_name = self._exp_name(frame, node, common)
        return args, host, exp, exp_name

    def _do_server(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        order = self._get(frame, node, args, "order", "0", lambda s: V.to_int(s, low=0, high=1))
        start = self._get(frame, node, args, "start", "0", lambda s: V.to_int(s, low=0, high=1))
        self._fetched.clear()
        yield DoServer(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                       order=order, start=start)

    def _do_client(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        if "server" not in args:
            raise self._err(frame, node.line, node.col, "DO_CLIENT: server= is required",
                            "e.g. DO_CLIENT host=h1 server=h2 test=TCP_STREAM")
        server = self._host(frame, node, {"server": args["server"]}, "server")
        self.last_host = host  # server= does not change the default host
        g = lambda k, d, c: self._get(frame, node, args, k, d, c)  # noqa: E731
        ca = g("ca", "reno", lambda s: V.name(s, "congestion control"))
        dur = g("dur", "20", lambda s: V.to_float(s, low=0.001, high=MAX_FLOW_SECONDS))
        delay = g("delay", "0", lambda s: V.to_float(s, low=0, high=MAX_SECONDS))
        instances = g("instances", "1", lambda s: V.to_int(s, low=1, high=10000))
        test_raw, test_tok = args.get("test", ("TCP_RR", None))
        self._undefined(test_raw, frame, node.line, test_tok.col if test_tok else node.col)
        test = test_raw.upper()
        if test not in TEST_TYPES:
            raise self._err(frame, node.line, test_tok.col if test_tok else node.col,
                            f"DO_CLIENT: unknown test {test_raw!r}",
                            suggest(test, TEST_TYPES) or "tests: " + ", ".join(TEST_TYPES))
        req_raw = args["req"][0] if "req" in args else "1M"
        if test == "TCP_RR" and req_raw in _STREAM_REQ:
            test = "TCP_STREAM"
        if test in _TCP_STREAMS:
            req, req_text = 0, "S"
            if "req" in args and req_raw not in _STREAM_REQ:
                g("req", "1M", V.to_size)  # still validated
        elif test == "UDP_STREAM":
            req = g("req", "1472", V.to_size)
            req_text = req_raw if "req" in args else "1472"
            if not 1 <= req <= 65507:
                raise self._err(frame, node.line, args["req"][1].col if "req" in args else node.col,
                                f"DO_CLIENT: UDP datagram size {req} is not in 1..65507")
        else:
            req = g("req", "1M", V.to_size)
            req_text = req_raw
        reply = g("reply", "1", V.to_size)
        stats = g("stats", "0", lambda s: V.to_int(s, low=0, high=1))
        local_buffer = g("localBuffer", "0", V.to_size)
        remote_buffer = g("remoteBuffer", "0", V.to_size)
        group = g("group", "0", lambda s: V.to_int(s, low=0))
        driver = g("driver", "builtin", lambda s: s)
        if driver not in DRIVERS:
            raw, tok = args["driver"]
            raise self._err(frame, node.line, tok.col, f"DO_CLIENT: unknown driver {raw!r}",
                            suggest(raw, DRIVERS) or "drivers: " + ", ".join(DRIVERS))
        pacing = g("pacing", "0", V.to_bits)
        rate = g("rate", "0", V.to_bits)
        interval = g("interval", "0.01", lambda s: V.to_float(s, low=0.001, high=60))
        if group == 0:
            if self._group_exp != exp:
                self._group_exp, self._group_next = exp, 1
            group = self._group_next
            self._group_next += 1
        # Flow ids are <client>-<server>-<group>-<instance>: a second DO_CLIENT with the
        # same ones would replace the first one's flows and data.
        pair = (exp, host, server, group)
        first = self._pairs.get(pair)
        if first is not None:
            raise self._err(frame, node.line, node.col,
                            f"DO_CLIENT: flows {host}-{server}-{group}-* are already in experiment {exp} "
                            f"(from {first})", "give one of them another group=N")
        self._pairs[pair] = f"{node.line.file}:{node.line.lineno}"
        self._fetched.clear()
        yield DoClient(
            loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name, server=server,
            ca=ca, dur=dur, delay=delay, instances=instances, req=req, req_text=req_text,
            reply=reply, stats=stats, local_buffer=local_buffer, remote_buffer=remote_buffer,
            test=test, group=group, driver=driver, pacing=pacing, rate=rate,
            interval=interval,
        )

    def _get_data(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        if (host, exp) in self._fetched:
            return  # the original skips a repeated GET_DATA until the next DO_*
        self._fetched.add((host, exp))
        yield GetData(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name)

    def _set_sysctl(self, node: Command, frame: _Frame) -> Iterator[Action]:
        kv, host, exp, exp_name = self._remote_common(node, frame, consume=False, open_args=True)
        settings: list[tuple[str, tuple[str, ...]]] = []
        for key, (raw, tok) in kv.items():
            if key in COMMON:
                continue
            self._undefined(raw, frame, node.line, tok.col)
            try:
                settings.append(V.sysctl_setting(key, raw))
            except KeyError:
                allowed = sorted(V.SYSCTLS)
                hint = suggest(key, allowed)
                raise self._err(frame, node.line, tok.col, f"SET_SYSCTL: sysctl {key!r} is not allowed",
                                (hint + " " if hint else "") + "allowed: " + ", ".join(allowed)) from None
            except ValueError as exc:
                raise self._err(frame, node.line, tok.col, f"SET_SYSCTL: {exc}") from None
        if not settings:
            raise self._err(frame, node.line, node.col, "SET_SYSCTL: no sysctl=value given",
                            "e.g. SET_SYSCTL host=h1 net.ipv4.tcp_ecn=1")
        yield SetSysctl(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                        settings=tuple(settings))

    def _set_module_params(self, node: Command, frame: _Frame) -> Iterator[Action]:
        kv, host, exp, exp_name = self._remote_common(node, frame, consume=False, open_args=True)
        if "module" not in kv:
            raise self._err(frame, node.line, node.col, "SET_MODULE_PARAMS: module= is required",
                            "modules: " + ", ".join(sorted(V.MODULE_PARAMS)))
        module, mtok = kv["module"]
        if module not in V.MODULE_PARAMS:
            hint = suggest(module, list(V.MODULE_PARAMS))
            raise self._err(frame, node.line, mtok.col,
                            f"SET_MODULE_PARAMS: module {module!r} is not allowed",
                            (hint + " " if hint else "") + "modules: " + ", ".join(sorted(V.MODULE_PARAMS)))
        allowed = V.MODULE_PARAMS[module]
        params: list[tuple[str, str]] = []
        for key, (raw, tok) in kv.items():
            if key in COMMON or key == "module":
                continue
            if key not in allowed:
                hint = suggest(key, allowed)
                raise self._err(frame, node.line, tok.col,
                                f"SET_MODULE_PARAMS: {module} parameter {key!r} is not allowed",
                                (hint + " " if hint else "") + "allowed: " + ", ".join(allowed))
            self._value(frame, node, node.name, key, raw, tok, lambda s: V.word(s, "value"))
            params.append((key, raw))
        if not params:
            raise self._err(frame, node.line, node.col, "SET_MODULE_PARAMS: no parameter given",
                            f"{module} parameters: " + ", ".join(allowed))
        yield SetModuleParams(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                              module=module, params=tuple(params))

    def _set_netem(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame, consume=False)
        if "netem_delay" not in args and "delay" not in args:
            raise self._err(frame, node.line, node.col, "SET_NETEM: netem_delay= is required",
                            "delay in ms; netem_delay=0 removes netem")
        if "netem_delay" in args and "delay" in args:
            raise self._err(frame, node.line, args["delay"][1].col,
                            "SET_NETEM: give netem_delay= or delay=, not both")
        key = "netem_delay" if "netem_delay" in args else "delay"
        g = lambda k, d, c: self._get(frame, node, args, k, d, c)  # noqa: E731
        delay = g(key, "0", lambda s: V.to_float(s, low=0, high=60000))
        yield SetNetem(
            loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name, delay=delay,
            limit=g("limit", "1000", lambda s: V.to_int(s, low=1, high=10**7)),
            loss=g("loss", "0", lambda s: V.to_float(s, low=0, high=100)),
            jitter=g("jitter", "0", lambda s: V.to_float(s, low=0, high=60000)),
            rate=g("rate", "0", V.to_bits),
        )

    def _set_qdisc(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame, consume=False)
        if "qdisc" not in args:
            raise self._err(frame, node.line, node.col, "SET_QDISC: qdisc= is required",
                            "qdiscs: " + ", ".join(V.QDISCS))
        qraw, qtok = args["qdisc"]
        self._undefined(qraw, frame, node.line, qtok.col)
        if qraw not in V.QDISCS:
            hint = suggest(qraw, V.QDISCS)
            raise self._err(frame, node.line, qtok.col, f"SET_QDISC: unknown qdisc {qraw!r}",
                            (hint + " " if hint else "") + "qdiscs: " + ", ".join(V.QDISCS))
        g = lambda k, d, c: self._get(frame, node, args, k, d, c)  # noqa: E731

        def action_ok(s: str) -> str:
            if s not in V.QDISC_ACTIONS:
                raise ValueError(f"expected one of add, change, replace, del; got {s!r}")
            return s

        def other_ok(s: str) -> str:
            return " ".join(qdisc_other_words(s))  # "mpu,64" -> the tc words "mpu 64", as the agent takes them

        yield SetQdisc(
            loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name, qdisc=qraw,
            action=g("action", "", action_ok),
            rate=g("rate", "", lambda s: V.tc_rate(s) if s else ""),
            burst=g("burst", "", lambda s: V.tc_size(s, "burst") if s else ""),
            limit=g("limit", "", lambda s: V.tc_size(s, "limit") if s else ""),
            other=g("other", "", other_ok),
        )

    def _do_tcpdump(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args, host, exp, exp_name = self._remote_common(node, frame)
        if "server" not in args:
            raise self._err(frame, node.line, node.col, "DO_TCPDUMP: server= is required",
                            "server=X captures without a host filter")
        raw, tok = args["server"]
        self._value(frame, node, node.name, "server", raw, tok, lambda s: V.word(s, "server"))
        server = raw if raw in ("X", "x") else self._qualify(raw)  # X: no host filter (runner: X or x)
        packets = self._get(frame, node, args, "packets", "10000",
                            lambda s: V.to_int(s, low=1, high=10**8))
        yield DoTcpdump(loc=self._loc(node, frame), host=host, exp=exp, exp_name=exp_name,
                        server=server, packets=packets)

    def _process_exp(self, node: Command, frame: _Frame) -> Iterator[Action]:
        args = self._kv(node, frame, node.name, ARGS[node.name])
        if "exp" not in args and self.last_exp is None:
            raise self._err(frame, node.line, node.col, "PROCESS_EXP: no experiment to process",
                            "run DO_SERVER/DO_CLIENT first or give exp=N")
        exp = self._exp(frame, node, args)
        self._exp_name(frame, node, args)
        self._group_exp, self._group_next = exp, 1
        yield ProcessExp(loc=self._loc(node, frame), exp=exp, desc=self.desc, other=self.other)

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


_MISSING = object()
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
