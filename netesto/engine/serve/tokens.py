"""The experiment tokens an engine server accepts (``--token``, ``--token-file``).

A hello carries its experiment's token; a server started with tokens serves only
hellos whose token it knows. It re-reads its token file when the file changes: the
agent adds each new experiment's token there, so a running server needs no restart.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable


class TokenSet:
    """Accepted per-experiment tokens: given ones plus a file re-read when it changes.

    With no tokens at all every token (including none) is accepted.
    """

    def __init__(self, tokens: Iterable[str] = (), path: str | None = None) -> None:
        self.fixed = {t for t in tokens if t}
        self.path = path
        self.from_file: set[str] = set()
        self._mtime = 0.0
        self._reload()

    def _reload(self) -> None:
        if not self.path:
            return
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime != self._mtime:
                self._mtime = mtime
                self.from_file = set(Path(self.path).read_text().split())
        except OSError:
            self.from_file = set()

    def accepts(self, token: str) -> bool:
        if not self.fixed and not self.path:
            return True
        if token in self.fixed or token in self.from_file:
            return True
        self._reload()
        return token in self.from_file


__all__ = ["TokenSet"]
