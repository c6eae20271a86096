"""One RUN invocation of a script (or its top level): the arguments and the call chain."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netesto.script.lexer import Line
    from netesto.script.parser import Macro


class Frame:
    """One RUN invocation (or the top level): its arguments and call chain.

    ``macro`` is the macro running (None at the top level), ``call`` the RUN line
    and column of its name, ``parent`` the frame that RUN stands in: an argument
    the macro lacks is reported there, where the user can pass it.
    """

    __slots__ = ("args", "stack", "base_dir", "macro", "call", "parent")

    def __init__(self, args: dict[str, str] | None, stack: tuple[str, ...],
                 base_dir: str | None, macro: "Macro | None" = None,
                 call: "tuple[Line, int] | None" = None, parent: "Frame | None" = None) -> None:
        self.args = args
        self.stack = stack
        self.base_dir = base_dir
        self.macro = macro
        self.call = call
        self.parent = parent

    def moved(self, base_dir: str | None) -> "Frame":
        """The same invocation reading SOURCE names from ``base_dir`` (a SOURCEd file's own)."""
        return Frame(self.args, self.stack, base_dir, self.macro, self.call, self.parent)


__all__ = ["Frame"]
