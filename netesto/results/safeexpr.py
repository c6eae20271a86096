"""A safe, vectorised expression evaluator over table columns (``ast`` whitelist, no eval).

Expressions are Python syntax restricted to: numbers and strings, column
names (identifiers, or ``col("name with % or -")``), ``+ - * / // %``,
comparisons (``== != < <= > >= in not in``), ``and or not``, ``&`` (text
concatenation, as in the original exp.py NewCol), and the functions of
:data:`FUNCTIONS`. Anything else (attributes, subscripts, lambdas, other
calls, ``**``) is refused with a :class:`~netesto.errors.ResultsError` that
quotes the expression.
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from netesto.errors import ResultsError


def _num(v: Any) -> Any:
    if isinstance(v, pd.Series):
        if pd.api.types.is_numeric_dtype(v):
            return v
        return pd.to_numeric(v, errors="coerce")
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return np.nan
    return v


def _text(v: Any) -> Any:
    if isinstance(v, pd.Series):
        return v.map(cell_text)
    return cell_text(v)


def cell_text(v: Any) -> str:
    """A cell as text for has/startswith/``&``: NaN is blank; a number is
    positional and as short as it reads back ("33554432", "1182.8"), never
    scientific or cut to 6 digits as ``%g`` (3.35544e+07) would be."""
    if isinstance(v, float):
        if np.isnan(v):
            return ""
        return np.format_float_positional(v, trim="-")
    return str(v)


def _has(a: Any, b: Any) -> Any:
    a = _text(a)
    if isinstance(a, pd.Series):
        return a.str.contains(str(b), regex=False)
    return str(b) in a


def _startswith(a: Any, b: Any) -> Any:
    a = _text(a)
    if isinstance(a, pd.Series):
        return a.str.startswith(str(b))
    return a.startswith(str(b))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "has": _has,
    "hasnot": lambda a, b: ~_has(a, b) if isinstance(a, pd.Series) else not _has(a, b),
    "startswith": _startswith,
    "num": _num,
    "text": _text,
    "abs": lambda a: abs(_num(a)),
    "round": lambda a, n=0: _num(a).round(int(n)) if isinstance(a, pd.Series) else round(_num(a), int(n)),
    "int": lambda a: np.floor(_num(a)),
    "isnull": lambda a: pd.isna(_num(a)),
}

_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CMP: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


class Evaluator:
    """Evaluates one expression against columns (a mapping name -> Series)."""

    def __init__(self, columns: Mapping[str, Any], text: str) -> None:
        self.columns = columns
        self.text = text

    def fail(self, why: str) -> ResultsError:
        return ResultsError(f"expression {self.text!r}: {why}")

    def column(self, name: str) -> Any:
        if name in self.columns:
            return self.columns[name]
        known = ", ".join(sorted(self.columns)) or "(none)"
        raise self.fail(f"unknown column {name!r}; columns: {known}")

    def eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in ("True", "False"):
                return node.id == "True"
            return self.column(node.id)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.eval(e) for e in node.elts]
        if isinstance(node, ast.UnaryOp):
            v = self.eval(node.operand)
            if isinstance(node.op, ast.Not):
                return ~v.astype(bool) if isinstance(v, pd.Series) else not v
            if isinstance(node.op, ast.USub):
                return -_num(v)
            if isinstance(node.op, ast.UAdd):
                return _num(v)
        if isinstance(node, ast.BoolOp):
            values = [self.eval(v) for v in node.values]
            out = values[0]
            for v in values[1:]:
                if isinstance(node.op, ast.And):
                    out = (out & v) if isinstance(out, pd.Series) or isinstance(v, pd.Series) else (out and v)
                else:
                    out = (out | v) if isinstance(out, pd.Series) or isinstance(v, pd.Series) else (out or v)
            return out
        if isinstance(node, ast.BinOp):
            a, b = self.eval(node.left), self.eval(node.right)
            if isinstance(node.op, ast.BitAnd):
                return _text(a) + _text(b)
            fn = _ARITH.get(type(node.op))
            if fn is None:
                raise self.fail(f"operator {type(node.op).__name__} is not allowed")
            with np.errstate(divide="ignore", invalid="ignore"):
                out = fn(_num(a), _num(b))
            if isinstance(out, pd.Series):
                out = out.replace([np.inf, -np.inf], np.nan)
            return out
        if isinstance(node, ast.Compare):
            left = self.eval(node.left)
            result: Any = True
            for op, right_node in zip(node.ops, node.comparators):
                right = self.eval(right_node)
                part = self._compare(op, left, right)
                result = part if result is True else (result & part)
                left = right
            return result
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.keywords:
                raise self.fail("only simple calls of the allowed functions are allowed")
            name = node.func.id
            args = [self.eval(a) for a in node.args]
            if name == "col":
                if len(args) != 1 or not isinstance(args[0], str):
                    raise self.fail('col() takes one column name: col("retransPkts%")')
                return self.column(args[0])
            fn = FUNCTIONS.get(name)
            if fn is None:
                raise self.fail(f"unknown function {name!r}; allowed: col, {', '.join(sorted(FUNCTIONS))}")
            try:
                return fn(*args)
            except TypeError as exc:
                raise self.fail(f"{name}(): {exc}") from exc
        raise self.fail(f"{type(node).__name__} is not allowed")

    def _compare(self, op: ast.cmpop, a: Any, b: Any) -> Any:
        if isinstance(op, (ast.In, ast.NotIn)):
            if not isinstance(b, list):
                raise self.fail("'in' needs a list: ca in ['cubic', 'bbr']")
            if isinstance(a, pd.Series):
                numeric = all(isinstance(x, (int, float)) for x in b)
                out = (_num(a) if numeric else _text(a)).isin(b if numeric else [str(x) for x in b])
                return ~out if isinstance(op, ast.NotIn) else out
            return (a in b) != isinstance(op, ast.NotIn)
        fn = _CMP[type(op)]
        # Numbers compare numerically, text as text (as the original's Select).
        if isinstance(a, str) or isinstance(b, str):
            return fn(_text(a), _text(b))
        return fn(_num(a), _num(b))


def parse(text: str) -> ast.Expression:
    """Parse ``text`` as one expression (a ResultsError if it is not one)."""
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ResultsError(f"expression {text!r}: syntax error at column {exc.offset}") from exc


def evaluate(text: str, columns: Mapping[str, Any]) -> Any:
    """Evaluate ``text`` over ``columns`` (Series of equal length, or scalars)."""
    return Evaluator(columns, text).eval(parse(text))


__all__ = ["FUNCTIONS", "cell_text", "evaluate", "parse"]
