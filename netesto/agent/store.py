"""The agent's data directory: ``<datadir>/<exp>/...``, kept until a controller acknowledges it."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from netesto.errors import AgentError
from netesto.policy import MAX_EXP
from netesto.protocol.names import inside, is_name
from netesto.protocol.replies import FileEntry


def exp_name(exp: Any) -> str:
    """The directory name of experiment ``exp`` (an int or a simple name)."""
    text = str(exp) if isinstance(exp, int) and not isinstance(exp, bool) else exp
    if isinstance(text, str) and text.isdigit() and int(text) > MAX_EXP:
        raise AgentError(f"experiment number {text[:30]} is over {MAX_EXP}", kind="UsageError")
    if not is_name(text, 64):
        shown = repr(exp) if len(repr(exp)) <= 80 else repr(exp)[:77] + "..."
        raise AgentError(f"bad experiment name {shown}: expected a number or [A-Za-z0-9_.:@+-]", kind="UsageError")
    return str(text)


class DataStore:
    """Files of experiments under one root; hidden entries (``.name``) are the agent's own."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.private = self.root / ".agent"
        self.private.mkdir(exist_ok=True)
        self._digests: dict[Path, tuple[int, int, str]] = {}

    def exp_dir(self, exp: Any, *, create: bool = True) -> Path:
        path = self.root / exp_name(exp)
        if path.is_symlink() or not inside(path, self.root):  # only the agent makes these: a link points outside the data directory
            raise AgentError(f"experiment {exp} is a symbolic link on this agent ({path}); refusing to use it",
                             kind="NotFound")
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    def experiments(self) -> list[str]:
        """Experiments with data on disk (not yet acknowledged), oldest first."""
        out = [p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
        out.sort(key=lambda p: (p.stat().st_mtime, p.name))
        return [p.name for p in out if any(f.is_file() for f in p.rglob("*"))]

    def files(self, exp: Any) -> list[FileEntry]:
        """The path, size and sha256 of every regular file of ``exp`` (paths relative, '/'-separated)."""
        base = self.exp_dir(exp, create=False)
        if not base.is_dir():
            raise AgentError(f"no data for experiment {exp} on this agent", kind="NotFound")
        out = []
        for path in sorted(base.rglob("*")):
            if path.is_file() and not path.is_symlink():
                out.append(FileEntry(path.relative_to(base).as_posix(), *self.digest(path)))
        return out

    def digest(self, path: Path) -> tuple[int, str]:
        """The size of ``path`` and the sha256 of that many bytes of it. A file that grows meanwhile (a
        running tcpdump's pcap) is hashed to the size it had, not to wherever the read ended: the
        client fetches that size and checks that hash (a hash to EOF failed every such fetch)."""
        st = path.stat()
        cached = self._digests.get(path)
        if cached and cached[:2] == (st.st_size, st.st_mtime_ns):
            return st.st_size, cached[2]
        h = hashlib.sha256()
        left = st.st_size
        with open(path, "rb") as f:
            while left > 0 and (block := f.read(min(1 << 20, left))):
                h.update(block)
                left -= len(block)
        if left:  # cut shorter meanwhile: what was hashed, which the next listing sees changed
            return st.st_size - left, h.hexdigest()
        self._digests[path] = (st.st_size, st.st_mtime_ns, h.hexdigest())
        return st.st_size, h.hexdigest()

    def resolve(self, exp: Any, relpath: str) -> Path:
        """The file ``relpath`` of ``exp``, refusing anything outside the experiment directory."""
        base = self.exp_dir(exp, create=False).resolve()
        try:
            path = (base / relpath).resolve()
            found = base in path.parents and path.is_file()
        except (OSError, ValueError):  # a NUL byte, a name too long, a symlink loop
            found = False
        if not found:
            raise AgentError(f"no file {relpath!r} in experiment {exp}", kind="NotFound")
        return path

    def read_chunk(self, exp: Any, relpath: str, offset: int, length: int) -> bytes:
        path = self.resolve(exp, relpath)
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def delete(self, exp: Any) -> bool:
        """Remove ``exp`` after the controller stored it; True if there was something."""
        path = self.exp_dir(exp, create=False)
        if not path.exists():
            return False
        shutil.rmtree(path)
        self._digests = {p: v for p, v in self._digests.items() if path not in p.parents}
        return True

    def write_private_json(self, name: str, text: str) -> Path:
        """Atomically write an agent-private file (journal, flow specs)."""
        path = self.private / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path


__all__ = ["DataStore", "exp_name"]
