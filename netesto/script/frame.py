"""One RUN invocation of a script (or its top level): the arguments and the call chain."""

from __future__ import annotations


class Frame:
    """One RUN invocation (or the top level): its arguments and call chain."""

    __slots__ = ("args", "stack", "base_dir")

    def __init__(self, args: dict[str, str] | None, stack: tuple[str, ...],
                 base_dir: str | None) -> None:
        self.args = args
        self.stack = stack
        self.base_dir = base_dir


__all__ = ["Frame"]
