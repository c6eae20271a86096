"""The sha256 sidecars of netesto's netCDF files: written with each file, checked by every reader.

Every netCDF file netesto writes (an experiment's ``exp.nc``, a sweep's ``sweep.nc``)
is moved into place by :func:`seal`, which writes ``<file>.sha256`` beside it in
``sha256sum`` form (``sha256sum -c exp.nc.sha256`` checks it by hand). Every reader
in the package opens the file through :func:`checked`: a damaged file is refused
before HDF5 reads it (a damaged heap or index made HDF5 loop for ever), and a file
without its sidecar, or with an empty one, is read with an :class:`IntegrityWarning`
saying that damage to it cannot be detected.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

from netesto.errors import ResultsError


class IntegrityWarning(UserWarning):
    """A netCDF file is read without a digest to check it against (no sidecar, or an empty one)."""


def sidecar(path: Path) -> Path:
    """``exp.nc.sha256``: the file's digest in ``sha256sum`` form."""
    return path.with_name(path.name + ".sha256")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def seal(tmp: Path, path: Path) -> Path:
    """Move the just-written ``tmp`` to ``path`` with its sidecar (``path.sha256``)."""
    digest = sha256(tmp)
    os.replace(tmp, path)
    sidecar(path).write_text(f"{digest}  {path.name}\n")
    return path


def check_digest(path: Path) -> None:
    """A ResultsError when ``path`` no longer matches the digest written with it. Without
    the digest (a file copied alone, an emptied sidecar) only HDF5's checksums are left,
    which cover the variables but not the attributes: an :class:`IntegrityWarning` says so."""
    side = sidecar(path)
    try:
        words: list[str] | None = side.read_text().split()
    except FileNotFoundError:
        words = None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read its digest {side.name}: {exc}") from exc
    if not words or len(words[0]) != 64:
        what = "no" if words is None else "an empty" if not words else "an unreadable"
        warnings.warn(f"{path}: {what} {side.name}: damage to it cannot be detected (HDF5's own checksums "
                      "cover its variables, not its attributes); processing it again writes one",
                      IntegrityWarning, stacklevel=3)
        return
    if sha256(path) != words[0]:
        raise ResultsError(f"{path}: damaged: its sha256 is not the one {side.name} recorded when it was written "
                           "(process the experiment again to rebuild it from the raw data)")


def checked(path: str | os.PathLike[str]) -> Path:
    """``path`` once :func:`check_digest` passed it: the one gate every reader of exp.nc and
    sweep.nc goes through (ResultsError if it is missing or damaged)."""
    p = Path(path)
    if not p.is_file():
        raise ResultsError(f"{p}: no such file")
    check_digest(p)
    return p


__all__ = ["IntegrityWarning", "check_digest", "checked", "seal", "sha256", "sidecar"]
