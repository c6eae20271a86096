"""RUN's arguments checked against the macro's parameters, and its defaults filled in.

What a RUN line gives is taken as written (its ``$names`` already expanded, an
undefined one already refused where it stands). Here: a name the macro does
not take is refused with "did you mean"; a required one that is missing is
named at the RUN; the defaults of the others are read (see
:mod:`netesto.script.params`). Nothing is taken from a global unless the
macro's declaration says so.
"""

from __future__ import annotations

from netesto.errors import ScriptError
from netesto.script.evaluator import VAR, Evaluator
from netesto.script.frame import Frame
from netesto.script.lexer import Line, Token
from netesto.script.params import DEFAULT, GLOBAL, REQUIRED
from netesto.script.parser import Macro, suggest


def bind(ev: Evaluator, macro: Macro, given: dict[str, tuple[str, Token]], frame: Frame,
         line: Line, col: int) -> dict[str, str]:
    """The variables ``macro`` runs with, from the RUN at ``line``:``col`` (its name)
    in ``frame`` that gave ``given`` (``name -> (value, word)``)."""
    name = macro.name
    params = macro.params
    missing = [p.name for p in params or () if p.kind == REQUIRED and p.name not in given]
    for key, (_, tok) in given.items():
        if not macro.takes(key):
            raise ev.err(frame, line, tok.col, f"RUN {name}: unknown argument {key!r}",
                         _unknown_hint(macro, key, missing))
    args = {key: value for key, (value, _) in given.items()}
    if params is None:
        return args
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise ev.err(frame, line, col, f"RUN {name}: missing argument{plural} {', '.join(missing)}",
                     f"pass {'=... '.join(missing)}=... ({_declared(macro)})")
    for p in params:
        if p.name in given or p.kind not in (DEFAULT, GLOBAL):
            continue
        if p.kind == GLOBAL and p.name in ev.variables:
            continue  # the macro reads the global itself
        args[p.name] = _default(ev, macro, p.name, p.default, args, frame, line, col)
    return args


def _default(ev: Evaluator, macro: Macro, key: str, text: str, args: dict[str, str],
             frame: Frame, line: Line, col: int) -> str:
    """A default's text, its ``$names`` read from the arguments so far, else the globals."""
    if "$" not in text:
        return text
    for m in VAR.finditer(text):
        ref = m.group(1)
        if ref not in args and ref not in ev.variables:
            raise ev.err(frame, line, col,
                         f"RUN {macro.name}: missing argument {key} (its default, ${ref}, is not set)",
                         f"pass {key}=..., or SET {ref} first ({_declared(macro)})")
    scope = Frame(args, frame.stack, frame.base_dir)
    try:
        return ev.sub(text, scope, line, col)
    except ScriptError as exc:
        raise ev.err(frame, line, col, f"RUN {macro.name}: the default of {key}: {exc.message}",
                     _declared(macro)) from None


def _declared(macro: Macro) -> str:
    decl = macro.line
    return f"BEGIN {macro.name} at {decl.file}:{decl.lineno}"


def _unknown_hint(macro: Macro, key: str, missing: list[str]) -> str:
    """"did you mean": first among the arguments this RUN lacks (clinet1 -> client1)."""
    accepted = macro.accepted()
    close = suggest(key, missing) or suggest(key, accepted)
    if close:
        return close
    if macro.params is not None:
        return f"{macro.name} takes {', '.join(accepted)} ({_declared(macro)})"
    reads = f"; it reads {', '.join('$' + a for a in accepted)}" if accepted else ""
    return (f"{macro.name} never reads ${key}{reads} (to take other arguments, declare them: "
            f"{_declared(macro)})")


__all__ = ["bind"]
