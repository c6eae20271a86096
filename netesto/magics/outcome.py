"""How a ``%%netesto`` cell ends when its run does not: an interrupt as one line, held warnings."""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator, TextIO

from netesto.errors import RunInterrupted

# results processing prints these per damaged flow file; the flows an interrupt stopped all are
HELD_PREFIX = "netesto results: warning:"


class CellInterrupted(RunInterrupted):
    """A ``%%netesto`` cell stopped by a kernel interrupt: IPython shows it as its one line.

    The cell still fails (a notebook's "run all" stops there, as after any interrupt),
    but with no traceback: ``_render_traceback_`` is IPython's hook for exceptions
    that show themselves.
    """

    def _render_traceback_(self) -> list[str]:
        return [self.format_message()]


def interrupted_line(exc: RunInterrupted, name: str) -> str:
    """The one line an interrupted cell ends with: what was stopped, where the data is."""
    result = exc.result
    if result is None:
        return f"netesto: interrupted before the run started; nothing ran, nothing bound to `{name}`"
    exps = ", ".join(str(e) for e in result.exps) or "none"
    return (f"netesto: run interrupted after {result.elapsed:.1f} s: flows stopped, hosts restored; "
            f"partial experiments {exps} kept in {result.workdir}; result in `{name}`")


class _HoldingStream:
    """Passes writes through to ``target``, except lines starting with ``prefix``, which it
    keeps in ``held``. ``print(text, file=...)`` writes the text and its newline apart: the
    lone newline after a kept line is kept with it."""

    def __init__(self, target: TextIO, prefix: str) -> None:
        self.target = target
        self.prefix = prefix
        self.held: list[str] = []
        self._after_held = False
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            if text.startswith(self.prefix) or (text == "\n" and self._after_held):
                self._after_held = text != "\n" and not text.endswith("\n")
                if text != "\n":
                    self.held.append(text.rstrip("\n") + "\n")
                return len(text)
            self._after_held = False
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


@contextmanager
def held_warnings(prefix: str = HELD_PREFIX) -> Iterator[_HoldingStream]:
    """While the block runs, stderr lines starting with ``prefix`` are kept, not shown;
    the caller shows ``stream.held`` or drops it (the results processing also writes
    them to ``<exp>/errors.txt``)."""
    real = sys.stderr
    stream = _HoldingStream(real, prefix)
    sys.stderr = stream  # type: ignore[assignment]
    try:
        yield stream
    finally:
        if sys.stderr is stream:
            sys.stderr = real


__all__ = ["CellInterrupted", "held_warnings", "interrupted_line"]
