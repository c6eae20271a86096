"""Where SOURCE files, the experiment counter and -D variables come from (all injectable).

Loaders resolve ``SOURCE name``; counters hold the original's ``counter`` file
(the number of the last experiment, used by ``exp=COUNTER``); defines are the
variables a command line sets before the script runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, Sequence

from netesto.errors import ScriptError, UsageError
from netesto.protocol.names import inside

# A SOURCEd file larger than this is not a macro library (the packaged ones are ~30 KB).
MAX_SOURCE_BYTES = 1 << 20
MAX_LISTED = 10_000  # names read per directory for a "did you mean" after a SOURCE typo


def parse_defines(items: list[str] | None) -> dict[str, str]:
    """``-D VAR=VALUE`` words -> {VAR: VALUE} (later ones win).

    >>> parse_defines(["dur=5", "ca=cubic,bbr", "x="])
    {'dur': '5', 'ca': 'cubic,bbr', 'x': ''}
    """
    out: dict[str, str] = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"-D {item!r}: expected VAR=VALUE")
        out[key] = value
    return out


def read_script(path: "str | os.PathLike[str]") -> str:
    """A script file's text (UTF-8); a byte that is not UTF-8 is a ScriptError at its line."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ScriptError(f"cannot read script: {exc.strerror or exc}", file=str(p)) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start]
        line = before.count(b"\n") + 1
        start = before.rfind(b"\n") + 1
        column = len(before[start:].decode("utf-8", "replace")) + 1
        text = data[start:].split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
        raise ScriptError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", file=str(p), line=line,
                          column=column, text=text, hint="save the script as UTF-8") from None


class Loader(Protocol):
    """Resolves SOURCE names: ``load(name, base_dir)`` -> (key, display name, text)."""

    def load(self, name: str, base_dir: str | None) -> tuple[str, str, str]: ...

    def searched(self, base_dir: str | None) -> list[str]: ...

    def names(self, base_dir: str | None) -> list[str]: ...


def packaged_inlib_dirs() -> list[Path]:
    """The macro-library directories: the installed ``netesto.inlib``, else the checkout's ``inlib/``."""
    dirs: list[Path] = []
    try:
        from importlib.resources import files

        root = files("netesto.inlib")
        dirs.append(Path(str(root)))
    except (ModuleNotFoundError, TypeError):
        pass
    # From this file, not netesto.__file__: that is None when a folder named netesto on
    # sys.path (the directory that holds a clone) shadows the package as a namespace.
    checkout = Path(__file__).resolve().parents[2] / "inlib"
    if checkout.is_dir() and all(checkout != d for d in dirs):
        dirs.append(checkout)
    return dirs


class FileLoader:
    """SOURCE from files: the including script's directory, the cwd, ``search_dirs``,
    then the packaged macro libraries (so ``SOURCE inlib`` works anywhere).

    Only those directories are read: a name that resolves outside the directory it
    was found in (``../../etc/passwd``, an absolute path elsewhere, a symlink out) is
    refused, and so is a file that is not a script (binary, over
    :data:`MAX_SOURCE_BYTES`, not UTF-8), without showing any of its content.
    """

    def __init__(self, search_dirs: "Sequence[str | os.PathLike[str]]" = (),
                 *, packaged: bool = True) -> None:
        self.search_dirs = [Path(d) for d in search_dirs]
        self.packaged = packaged

    def _candidates(self, base_dir: str | None) -> list[Path]:
        dirs: list[Path] = []
        if base_dir:
            dirs.append(Path(base_dir))
        dirs.append(Path.cwd())
        dirs.extend(self.search_dirs)
        if self.packaged:
            dirs.extend(packaged_inlib_dirs())
        # Once each: a script in the working directory has it as its own folder too.
        seen: set[Path] = set()
        unique: list[Path] = []
        for d in dirs:
            key = d.resolve()
            if key not in seen:
                seen.add(key)
                unique.append(d)
        return unique

    def searched(self, base_dir: str | None) -> list[str]:
        return [str(d) for d in self._candidates(base_dir)]

    def names(self, base_dir: str | None) -> list[str]:
        """The file names in the directories SOURCE reads (for "did you mean")."""
        out: set[str] = set()
        for d in self._candidates(base_dir):
            try:
                with os.scandir(d) as entries:
                    for i, entry in enumerate(entries):
                        if i >= MAX_LISTED:
                            break  # a huge folder: its first names suffice for a hint
                        if entry.is_file() and not entry.name.startswith("."):
                            out.add(entry.name)
            except OSError:
                continue
        return sorted(out)

    def load(self, name: str, base_dir: str | None) -> tuple[str, str, str]:
        roots = self._candidates(base_dir)
        path = Path(name)
        if path.is_absolute():
            tries = [(path, root) for root in roots]
        else:
            tries = [(root / name, root) for root in roots]
        outside = False
        for candidate, root in tries:
            if not inside(candidate, root):
                outside = outside or candidate.exists()
                continue
            if candidate.is_file():
                return str(candidate.resolve()), str(candidate), _read_source(candidate)
        dirs = [c for c, root in tries if inside(c, root) and c.is_dir()]
        if dirs:
            raise LookupError(f"{dirs[0]} is a directory, not a script file")
        if outside:
            raise LookupError(f"{name!r} is outside the directories SOURCE reads "
                              "(the script's folder, the working directory, the search path, the macro libraries)")
        raise LookupError(f"file {name!r} not found")


def _read_source(path: Path) -> str:
    """A SOURCEd file's text; LookupError (naming only the file) when it is not a script."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise LookupError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_SOURCE_BYTES:
        raise LookupError(f"{path} is larger than {MAX_SOURCE_BYTES >> 20} MiB: not a script file")
    if b"\0" in data:
        raise LookupError(f"{path} is a binary file, not a script file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LookupError(f"{path} is not UTF-8 text, not a script file") from None


class MemoryLoader:
    """SOURCE from a dict ``{name: text}`` (tests, notebooks)."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})

    def searched(self, base_dir: str | None) -> list[str]:
        return ["<memory: " + ", ".join(sorted(self.files)) + ">"]

    def names(self, base_dir: str | None) -> list[str]:
        return sorted(self.files)

    def load(self, name: str, base_dir: str | None) -> tuple[str, str, str]:
        if name not in self.files:
            raise LookupError(f"file {name!r} not found")
        return name, name, self.files[name]


class Counter(Protocol):
    """The experiment counter: ``value`` is the last experiment number used."""

    def peek(self) -> int: ...

    def take(self) -> int: ...

    def round_up(self) -> None: ...


def next_round(value: int) -> int:
    """NEXT_COUNTER: move so the next experiment number ends in 1.

    >>> next_round(23), next_round(19), next_round(20), next_round(0)
    (30, 30, 30, 10)
    """
    if value % 10 == 9:
        return value + 11
    return (value // 10 + 1) * 10


class MemoryCounter:
    """A counter kept in memory (plans never consume real counter values)."""

    def __init__(self, start: int = 0) -> None:
        self.value = int(start)

    def peek(self) -> int:
        return self.value

    def take(self) -> int:
        self.value += 1
        return self.value

    def round_up(self) -> None:
        self.value = next_round(self.value)


class FileCounter:
    """The original's ``counter`` file: one integer; missing means 0.

    ``take()`` reads it, adds one, writes it back and returns the new value.
    """

    def __init__(self, path: "str | os.PathLike[str]") -> None:
        self.path = Path(path)

    def peek(self) -> int:
        return read_counter_file(self.path)

    def _write(self, value: int) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(f"{value}\n", encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            raise UsageError(f"{self.path}: cannot write the counter file: {exc.strerror or exc}") from exc

    def take(self) -> int:
        value = self.peek() + 1
        self._write(value)
        return value

    def round_up(self) -> None:
        # Like the original: only when the file exists.
        if self.path.exists():
            self._write(next_round(self.peek()))


def read_counter_file(path: "str | os.PathLike[str]") -> int:
    """The integer in a counter file (0 if missing or empty)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{p}: cannot read the counter file: {getattr(exc, 'strerror', None) or exc}") from exc
    if not text:
        return 0
    try:
        return int(text.split()[0])
    except ValueError as exc:
        raise UsageError(f"{p}: counter file holds {text[:40]!r}, not an integer") from exc


__all__ = [
    "Counter",
    "FileCounter",
    "FileLoader",
    "Loader",
    "MAX_SOURCE_BYTES",
    "MemoryCounter",
    "MemoryLoader",
    "next_round",
    "packaged_inlib_dirs",
    "read_counter_file",
    "read_script",
]
