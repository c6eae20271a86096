"""Interpreter: runs the AST and yields Actions lazily, one command at a time.

Being a generator matters: the controller consumes actions while the
experiment runs, so ``exp=COUNTER`` reads and bumps the counter file at the
moment the original would have. Everything is bounded (FOR iterations, macro
depth, variable expansion, statements and actions), so no script can hang.

The rooms: :mod:`~netesto.script.evaluator` (variables, ``$name`` expansion,
located errors), :mod:`~netesto.script.located` (a command's arguments with
where each stands), :mod:`~netesto.script.book` (which experiment and host a
command means), :mod:`~netesto.script.params` and :mod:`~netesto.script.call`
(a macro's parameters, and RUN's arguments checked against them), one builder
per command in :mod:`~netesto.script.local` and :mod:`~netesto.script.remote`;
this module runs the blocks (FOR, IF, IF_DEF,
macros and RUN, SOURCE, END) and hands each command to its builder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping

from netesto.errors import ScriptError
from netesto.script import local, remote
from netesto.script import validate as V
from netesto.script.actions import Action, Echo, Location
from netesto.script.book import Book
from netesto.script.call import bind
from netesto.script.evaluator import MAX_DEPTH, MAX_EXPANSION, VAR, VARNAME, Evaluator
from netesto.script.frame import Frame
from netesto.script.linkcmd import check_ended
from netesto.script.lexer import Token
from netesto.script.located import Args, Site
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
    parse,
    suggest,
)
from netesto.script.store import Counter, FileLoader, Loader, MemoryCounter, read_script

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:,(-?\d+))?$")

MAX_FOR_ITERATIONS = 100_000
MAX_STEPS = 2_000_000
MAX_ACTIONS = 1_000_000


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


class Interpreter(Evaluator):
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

    The blocks (FOR, IF, IF_DEF, macros, RUN, SOURCE, END) run here; every other
    command is one builder of :mod:`netesto.script.local` or
    :mod:`netesto.script.remote`, reading its arguments through a
    :class:`~netesto.script.located.Site` or :class:`~netesto.script.located.Args`.
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
        start = state if state is not None else State()
        super().__init__(dict(start.variables), defines, max_depth=max_depth,
                         max_expansion=max_expansion, for_loop_print=start.for_loop_print)
        self.loader: Loader = loader if loader is not None else FileLoader()
        self.macros: dict[str, Macro] = dict(start.macros)
        self.sourced: set[str] = set(start.sourced)
        suffix_set = start.host_suffix is not None  # by a HOST_SUFFIX command
        self.book = Book(counter if counter is not None else MemoryCounter(),
                         start.host_suffix if start.host_suffix is not None else host_suffix.lstrip("."),
                         suffix_set=suffix_set, desc=start.desc, other=start.other)
        self.max_steps = max_steps
        self.max_actions = max_actions
        self.max_loops = max_loops
        self.steps = 0
        self._where: tuple[Node, Frame] | None = None  # the command being run (for RecursionError)
        self.loops = 0
        self.actions = 0
        self.ended = False

    @property
    def counter(self) -> Counter:
        """What ``exp=COUNTER`` takes numbers from (kept in the experiment book)."""
        return self.book.counter

    def state(self) -> State:
        """A snapshot of what the scripts run so far defined (see :class:`State`)."""
        book = self.book
        return State(variables=MappingProxyType(dict(self.variables)),
                     macros=MappingProxyType(dict(self.macros)), sourced=frozenset(self.sourced),
                     host_suffix=book.host_suffix if book.suffix_set else None,
                     desc=book.desc, other=book.other, for_loop_print=self.for_loop_print)

    def run_text(self, text: str, file: str = "<script>",
                 base_dir: str | None = None) -> Iterator[Action]:
        """Parse ``text`` now (syntax errors raise here) and return a lazy action stream."""
        nodes = parse(text, file)
        self.ended = False  # END stops one script, not the interpreter for good
        if base_dir is None and not file.startswith("<"):
            base_dir = str(Path(file).parent)
        return self._run(nodes, Frame(None, (), base_dir))

    def run_file(self, path: str | Path) -> Iterator[Action]:
        """Run a script file (SOURCE names resolve next to it first)."""
        p = Path(path)
        text = read_script(p)
        self.sourced.add(str(p.resolve()))
        return self.run_text(text, file=str(p), base_dir=str(p.parent))

    def _run(self, nodes: tuple[Node, ...], frame: Frame) -> Iterator[Action]:
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
            raise self.err(at, node.line, node.col, "script nests too deeply for Python",
                           "fewer nested RUNs and FORs") from exc
        check_ended(self.book)  # a SET_LINK no flows followed

    def _block(self, nodes: Iterable[Node], frame: Frame) -> Iterator[Action]:
        for node in nodes:
            self._where = (node, frame)
            self.steps += 1
            if self.steps > self.max_steps:
                raise self._too_many_steps(node, frame)
            if type(node) is Command:
                yield from self._command(node, frame)
            elif type(node) is For:
                yield from self._for(node, frame)
            elif type(node) is If:
                if self._if(node, frame):
                    yield from self._block((node.body,), frame)
            elif type(node) is IfDef:
                yield from self._ifdef(node, frame)
            elif type(node) is Macro:
                self.macros[node.name] = node
            elif type(node) is End:
                self.book.counter.round_up()
                raise _Stop()

    def _too_many_steps(self, node: Node, frame: Frame) -> ScriptError:
        return self.err(frame, node.line, node.col, f"script ran more than {self.max_steps} commands",
                        "an endless loop? raise max_steps if this is intended")

    def _if(self, node: If, frame: Frame) -> bool:
        """IF's condition. ``IF $flag:`` with no ``flag`` defined is false (the
        original's switch: SET tcpDump=500 turns a capture on); any other
        undefined ``$name`` in a condition is an error, as everywhere."""
        cond = node.cond.text
        if cond[:1] == "$":
            m = VAR.fullmatch(cond)
            if m is not None and self.lookup(m.group(1), frame) is None:
                return False
        return self.truthy(self.sub(cond, frame, node.line, node.cond.col))

    def _ifdef(self, node: IfDef, frame: Frame) -> Iterator[Action]:
        name = node.name.text
        if name.startswith("$"):
            defined = self.lookup(name[1:], frame) is not None
        else:
            defined = self.sub(name, frame, node.line, node.name.col) in self.macros
        if defined:
            yield from self._block((node.body,), frame)

    def _for(self, node: For, frame: Frame) -> Iterator[Action]:
        text = self.sub(node.items.text, frame, node.line, node.items.col)
        self.undefined(text, frame, node.line, node.items.col)
        for value in self._for_items(text, node, frame):
            self.loops += 1
            if self.loops > self.max_loops:
                raise self.err(frame, node.line, node.col, f"more than {self.max_loops} FOR iterations in total",
                               "the original's cap; split the script or shorten the lists")
            self.variables[node.var] = value
            if self.for_loop_print:
                yield Echo(loc=Location(node.line.file, node.line.lineno, node.col,
                                        node.line.text, frame.stack),
                           text=f"FOR {node.var}={value}")
            yield from self._block(node.body, frame)

    def _for_items(self, text: str, node: For, frame: Frame) -> list[str]:
        m = _RANGE.match(text)
        if not m:
            return [item for item in text.split(",") if item != ""]
        col = node.items.col
        if len(text) > 60:  # also keeps int() clear of Python's 4300-digit limit
            raise self.err(frame, node.line, col, f"FOR range {text[:40]}... has numbers too large to loop over")
        low, high = int(m.group(1)), int(m.group(2))
        step = int(m.group(3)) if m.group(3) else 1
        if step <= 0:
            raise self.err(frame, node.line, col, f"FOR range step must be positive, got {step}",
                           "a descending range counts down by the step: 10..1,2")
        count = abs(high - low) // step + 1
        if count > self.max_loops - self.loops:
            raise self.err(frame, node.line, col,
                           f"FOR range {text} ({count} items) would pass the cap of "
                           f"{self.max_loops} FOR iterations in total ({self.loops} used so far)")
        sign = 1 if high >= low else -1
        return [str(low + sign * step * i) for i in range(count)]

    def _command(self, node: Command, frame: Frame) -> Iterator[Action]:
        name = node.name
        if name.startswith("$"):
            resolved = self.sub(name, frame, node.line, node.col).split()
            if not resolved or resolved[0] not in SIMPLE_COMMANDS:
                word = resolved[0] if resolved else ""
                raise self.err(frame, node.line, node.col,
                               f"{name} expands to {word!r}, which is not a command",
                               suggest(word, SIMPLE_COMMANDS))
            extra = tuple(Token(t, node.col) for t in resolved[1:])
            node = Command(node.line, node.col, resolved[0], extra + node.args, node.rest)
            name = node.name
        on_host = remote.BUILDERS.get(name)
        if on_host is not None:
            yield from on_host(Args(self, node, frame, remote.ARGS[name]), self.book)
        elif name == "RUN":
            yield from self._run_macro(node, frame)
        elif name == "SOURCE":
            yield from self._source(node, frame)
        else:
            actions = local.BUILDERS[name](Site(self, node, frame), self.book)
            if actions is not None:
                yield from actions

    def _source(self, node: Command, frame: Frame) -> Iterator[Action]:
        toks = self.tokens(node, frame)
        if len(toks) != 1:
            raise self.err(frame, node.line, node.col, "SOURCE takes one file name")
        try:
            key, display, text = self.loader.load(toks[0].text, frame.base_dir)
        except LookupError as exc:
            raise self.err(frame, node.line, toks[0].col, f"SOURCE: {exc.args[0]}",
                           _source_hint(self.loader, toks[0].text, frame.base_dir)) from None
        if key in self.sourced:
            return
        if not _opens_like_a_script(text):
            # Say nothing of its content: SOURCE must not become a way to print files.
            raise self.err(frame, node.line, toks[0].col,
                           f"SOURCE: {display} is not a netesto script (its first line is not a command)")
        self.sourced.add(key)
        nodes = parse(text, display)
        base = str(Path(display).parent) if not display.startswith("<") and "/" in display else frame.base_dir
        yield from self._block(nodes, frame.moved(base))

    def _run_macro(self, node: Command, frame: Frame) -> Iterator[Action]:
        toks = self.tokens(node, frame)
        if not toks:
            raise self.err(frame, node.line, node.col, "RUN needs a macro name", "RUN name[,reps] key=value ...")
        head = toks[0]
        name, comma, reps_text = head.text.partition(",")
        reps = 1
        if comma:
            reps = Site(self, node, frame).convert("repetitions", reps_text, head.col,
                                                   lambda s: V.to_int(s, low=0, high=self.max_loops))
        macro = self.macros.get(name)
        if macro is None:
            hint = suggest(name, list(self.macros))
            if not hint:
                hint = ("defined macros: " + ", ".join(sorted(self.macros))
                        if self.macros else "no macros defined; SOURCE inlib first?")
            raise self.err(frame, node.line, head.col, f"RUN: unknown macro {name!r}", hint)
        given = self._macro_args(name, toks[1:], node, frame)
        args = bind(self, macro, given, frame, node.line, head.col)
        depth = len(frame.stack) + 1
        if depth > self.max_depth:
            raise self.err(frame, node.line, node.col, f"RUN {name}: macros nested more than {self.max_depth} deep",
                           "a macro that RUNs itself?")
        # Only a ca list the RUN gives splits the run, not one a default reads.
        cas = [c for c in given["ca"][0].split(",") if c] if "ca" in given else []
        where = f"RUN {name} at {node.line.file}:{node.line.lineno}"
        base = str(Path(macro.line.file).parent) if not macro.line.file.startswith("<") else frame.base_dir
        call = (node.line, head.col)
        for _ in range(reps):
            for ca in (cas if len(cas) > 1 else [None]):
                self.steps += 1
                if self.steps > self.max_steps:
                    raise self._too_many_steps(node, frame)
                call_args = dict(args)
                if ca is not None:
                    call_args["ca"] = ca
                yield from self._block(macro.body, Frame(call_args, frame.stack + (where,), base,
                                                         macro, call, frame))

    def _macro_args(self, name: str, toks: list[Token], node: Command,
                    frame: Frame) -> dict[str, tuple[str, Token]]:
        """RUN's ``key=value`` words: ``key -> (value, word)``, as given."""
        args: dict[str, tuple[str, Token]] = {}
        for tok in toks:
            key, eq, value = tok.text.partition("=")
            if not eq or not VARNAME.match(key):
                raise self.err(frame, node.line, tok.col, f"RUN {name}: expected key=value, got {tok.text!r}")
            if key in args:
                raise self.err(frame, node.line, tok.col, f"RUN {name}: {key} given twice",
                               f"the first is at column {args[key][1].col}")
            args[key] = (value, tok)
        return args


def _source_hint(loader: Loader, name: str, base_dir: str | None) -> str:
    """SOURCE's hint: a close file name ("did you mean inlib?") and the directories searched."""
    searched = "searched: " + ", ".join(loader.searched(base_dir))
    close = suggest(name, loader.names(base_dir))
    return f"{close}\n    {searched}" if close else searched


def _opens_like_a_script(text: str) -> bool:
    """Whether the first line that is not blank or a comment starts with a command word."""
    for line in text.splitlines():
        words = line.upper().split(None, 2)
        if not words or words[0].startswith("#"):
            continue
        joined = "_".join(words[:2])  # "DO SERVER" is read as DO_SERVER, as the parser does
        return words[0] in COMMANDS or joined in COMMANDS or words[0].startswith("$")
    return True


def plan(text: str, *, file: str = "<script>", **kw: object) -> list[Action]:
    """All actions of a script, eagerly (a MemoryCounter unless ``counter=`` is given)."""
    return list(Interpreter(**kw).run_text(text, file=file))  # type: ignore[arg-type]


__all__ = ["Interpreter", "State", "plan"]
