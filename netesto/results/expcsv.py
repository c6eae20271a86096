"""``exp.csv``: ``fields.txt`` parsing, the original's aggregation ops, atomic appends.

``fields.txt`` has one ``field:op`` per line (``#`` comments). A record of
``key:value`` items (a ``.exp.out`` file) becomes one CSV row:

``one``        first value; a later different value makes it ``first+...``
``all``        distinct non-empty values joined with ``/`` (``cubic/reno``)
``sum`` ``min`` ``max``   numeric (suffix K/M/G = 1e3/1e6/1e9), printed ``%.1f``
``avg``        sum / count printed ``%.3f``; blank if no numeric value
``sumRateDur`` the aggregate goodput over the experiment: sum(rate_i x dur_i) /
               (max(delay_i + dur_i) - min(delay_i)), ``dur`` and ``delay`` taken
               from the latest such items before each ``rate`` item (dividing by
               max(dur_i) alone gave 147 Mbit/s for two 10 s flows 5 s apart on a
               100 Mbit/s link: their bits spread over 15 s, not 10)

Field names match item keys exactly, or with ``-`` and ``_`` treated alike
(the original's ``adaptive_rx`` field never matched its ``adaptive-rx`` key).
``desc`` comes from the caller; ``other`` pairs override every non-avg field.
Appends rewrite the file through a temporary file and a rename, under a lock,
with proper CSV quoting: a failure never leaves a half-written ``exp.csv``.
"""

from __future__ import annotations

import csv
import fcntl
import io
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from netesto.errors import ResultsError

OPS = ("one", "all", "avg", "sum", "min", "max", "sumRateDur")
_SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class Field:
    """One exp.csv column and how a record's values of it are combined."""

    name: str
    op: str


def parse_fields(text: str, *, source: str = "fields.txt") -> tuple[Field, ...]:
    """Parse ``fields.txt`` text (errors name ``source:line``)."""
    out: list[Field] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, op = line.rpartition(":")
        name, op = name.strip(), op.strip()
        if not sep or not name:
            raise ResultsError(f"{source}:{lineno}: expected 'field:op', got {line!r}")
        if op not in OPS:
            raise ResultsError(f"{source}:{lineno}: unknown op {op!r} for {name!r}; one of {', '.join(OPS)}")
        out.append(Field(name, op))
    if not out:
        raise ResultsError(f"{source}: no fields")
    return tuple(out)


def default_fields_text() -> str:
    """The shipped default fields.txt: the original's 58 fields in its order, then netesto's limit shares."""
    return resources.files("netesto").joinpath("data/fields.txt").read_text()


def load_fields(workdir: str | os.PathLike[str] | None = None,
                fields_file: str | os.PathLike[str] | None = None) -> tuple[Field, ...]:
    """``fields_file`` if given, else ``<workdir>/fields.txt`` if present, else the default."""
    candidates = [Path(fields_file)] if fields_file else []
    if not fields_file and workdir is not None and (Path(workdir) / "fields.txt").is_file():
        candidates.append(Path(workdir) / "fields.txt")
    for path in candidates:
        try:
            return parse_fields(path.read_text(), source=str(path))
        except OSError as exc:
            raise ResultsError(f"{path}: cannot read fields file: {exc.strerror}") from exc
    return parse_fields(default_fields_text(), source="netesto/data/fields.txt")


def parse_number(text: str) -> float | None:
    """A number with optional K/M/G suffix (1e3/1e6/1e9); None if not numeric.

    >>> parse_number("10K"), parse_number("1.5"), parse_number("on")
    (10000.0, 1.5, None)
    """
    t = str(text).strip()
    if not t:
        return None
    scale = 1.0
    if t[-1] in _SUFFIX:
        scale, t = _SUFFIX[t[-1]], t[:-1]
    try:
        v = float(t) * scale
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _norm(name: str) -> str:
    return name.replace("_", "-")


def parse_other(other: str | Iterable[Any]) -> list[tuple[str, str]]:
    """``"k=v,k2=v2"`` or pairs -> list of (key, value)."""
    if isinstance(other, str):
        pairs = []
        for part in other.split(","):
            if part.strip():
                k, sep, v = part.partition("=")
                if not sep:
                    raise ResultsError(f"other: expected key=value, got {part!r}")
                pairs.append((k.strip(), v.strip()))
        return pairs
    if not isinstance(other, Iterable) or isinstance(other, Mapping):
        raise ResultsError(f"other: expected 'k=v,...' or [key, value] pairs, got {other!r}")
    out = []
    for item in other:
        if isinstance(item, str):
            out.extend(parse_other(item))
        elif isinstance(item, Sequence) and len(item) == 2:
            k, v = item[0], item[1]
            out.append((str(k), str(v)))
        else:
            raise ResultsError(f"other: expected key=value or a [key, value] pair, got {item!r}")
    return out


def aggregate(
    items: Iterable[tuple[str, str]],
    fields: Sequence[Field],
    *,
    desc: str = "",
    other: str | Iterable[Any] = (),
) -> dict[str, str]:
    """One CSV row (field -> text) from a record's ``key:value`` items."""
    by_key: dict[str, Field] = {}
    for f in fields:
        by_key.setdefault(f.name, f)
        by_key.setdefault(_norm(f.name), f)
    state: dict[str, Any] = {}
    last_dur: float | None = None
    last_delay: float | None = None
    for key, value in items:
        value = str(value).strip()
        if key == "dur":
            last_dur = parse_number(value)
        elif key == "delay":
            last_delay = parse_number(value)
        found = by_key.get(key) or by_key.get(_norm(key))
        if found is None:
            continue
        f = found
        if f.op == "one":
            if f.name not in state:
                state[f.name] = value
            elif value != state[f.name].removesuffix("+...") and not state[f.name].endswith("+..."):
                state[f.name] += "+..."
            continue
        if f.op == "all":
            if value:
                state.setdefault(f.name, [])
                if value not in state[f.name]:
                    state[f.name].append(value)
            continue
        num = parse_number(value)
        if num is None:
            continue
        if f.op == "sumRateDur":
            acc = state.setdefault(f.name, [0.0, 0.0, math.inf])  # bits, latest end, earliest start
            dur = last_dur if last_dur is not None and last_dur > 0 else 1.0
            delay = last_delay if last_delay is not None and last_delay >= 0 else 0.0
            acc[0] += num * dur
            acc[1] = max(acc[1], delay + dur)
            acc[2] = min(acc[2], delay)
        elif f.op == "avg":
            acc = state.setdefault(f.name, [0.0, 0])
            acc[0] += num
            acc[1] += 1
        elif f.op == "sum":
            state[f.name] = state.get(f.name, 0.0) + num
        elif f.op == "min":
            state[f.name] = min(state.get(f.name, num), num)
        elif f.op == "max":
            state[f.name] = max(state.get(f.name, num), num)
    row: dict[str, str] = {}
    for f in fields:
        v = state.get(f.name)
        if v is None:
            row[f.name] = ""
        elif f.op == "one":
            row[f.name] = v
        elif f.op == "all":
            row[f.name] = "/".join(v)
        elif f.op == "avg":
            row[f.name] = f"{v[0] / v[1]:.3f}" if v[1] else ""
        elif f.op == "sumRateDur":
            span = v[1] - v[2]
            row[f.name] = f"{v[0] / span:.1f}" if span > 0 else ""
        else:
            row[f.name] = f"{v:.1f}"
    if "desc" in row and desc:
        row["desc"] = desc
    ops = {f.name: f.op for f in fields}
    for k, v in parse_other(other):
        if k in ops and ops[k] != "avg":
            row[k] = v
    return row


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(f".{path.name}.lock")
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_header(path: Path) -> list[str] | None:
    """The header row of an existing CSV file (None if absent or empty)."""
    try:
        with open(path, newline="") as fh:
            return next(csv.reader(fh), None)
    except FileNotFoundError:
        return None


def _without_exp(old: bytes, exp: int | str) -> bytes:
    """``old`` CSV text less the rows of experiment ``exp`` (``exp`` column ``N.0``, ``N.1``, ...)."""
    lines = old.decode("utf-8").splitlines(keepends=True)
    rows = list(csv.reader(lines))
    if not rows or "exp" not in rows[0]:
        return old
    col = rows[0].index("exp")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(rows[0])
    for row in rows[1:]:
        if not (len(row) > col and row[col].split(".")[0] == str(exp)):
            writer.writerow(row)
    return out.getvalue().encode("utf-8")


def append_rows(path: str | os.PathLike[str], fields: Sequence[Field],
                rows: Iterable[Mapping[str, Any]], *, replace_exp: int | str | None = None) -> Path:
    """Append ``rows`` to the CSV at ``path`` atomically (header written if new).

    With ``replace_exp`` the rows experiment ``replace_exp`` already has are
    dropped first, so processing an experiment again replaces its rows.

    An existing file keeps its own header: rows are written in its column
    order (fields it lacks are dropped, columns it has that the rows lack stay
    blank). The new content goes to a temporary file next to ``path`` and
    replaces it with one rename; on any error the temporary file is removed
    and ``path`` is untouched.
    """
    path = Path(path)
    with _locked(path):
        # Writers hold the lock until they rename: a temporary file seen here
        # was left by a writer that was killed, so it is only debris.
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            stale.unlink(missing_ok=True)
        header = read_header(path)
        old = path.read_bytes() if header is not None else b""
        if old and replace_exp is not None:
            old = _without_exp(old, replace_exp)
        columns = header if header is not None else [f.name for f in fields]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as out:
                out.write(old)
                if old and not old.endswith(b"\n"):
                    out.write(b"\n")
                text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
                writer = csv.writer(text, lineterminator="\n")
                if header is None:
                    writer.writerow(columns)
                for row in rows:
                    writer.writerow(["" if row.get(c) is None else str(row.get(c)) for c in columns])
                text.flush()
                os.fsync(out.fileno())
                text.detach()
            os.replace(tmp, path)
        except BaseException as exc:
            tmp.unlink(missing_ok=True)
            if isinstance(exc, (OSError, ValueError, TypeError)):
                raise ResultsError(f"{path}: cannot append rows: {exc}") from exc
            raise
    return path



def read_rows(path: str | os.PathLike[str], exps: Iterable[int] | None = None) -> list[dict[str, str]]:
    """exp.csv's rows (of experiments ``exps`` only, when given), as text; none if there is no file."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        return []
    if exps is None:
        return rows
    wanted = {str(e) for e in exps}
    return [r for r in rows if (r.get("exp") or "").split(".")[0] in wanted]


def rate_table(rows: Iterable[Mapping[str, str]]) -> list[str]:
    """The headline lines of exp.csv rows: experiment, host, ca, rate, rtt, retransmits, and what
    limited the flows when it was their hosts (the receiver's window or the send buffer, from
    ``rwndLimited%``/``sndbufLimited%``, at :data:`~netesto.results.limits.HOST_LIMIT_PERCENT` or more).

    >>> print("\\n".join(rate_table([{"exp": "1.0", "host": "h2", "ca": "cubic", "rate": "46.5", "rtt": "30500",
    ...                                "sndbufLimited%": "31.2", "rwndLimited%": "0.4"}])))
      exp    host  ca          rate(Mbit/s)  rtt(ms)  retrans  host-limited
      1.0    all   cubic               46.5     30.5           sndbuf 31%
    """
    from netesto.results.limits import HOST_LIMIT_PERCENT

    out = ["  exp    host  ca          rate(Mbit/s)  rtt(ms)  retrans  host-limited"]
    for row in rows:
        exp = row.get("exp") or ""
        host = "all" if exp.endswith(".0") else row.get("host") or ""
        rtt = parse_number(row.get("rtt") or "")
        rtt_ms = f"{rtt / 1000:.1f}" if rtt is not None else "-"
        retrans = row.get("retrans_total") or row.get("localRetrans") or ""
        limits = [(name, parse_number(row.get(key) or "")) for name, key in (("sndbuf", "sndbufLimited%"),
                                                                           ("rwnd", "rwndLimited%"))]
        limited = " ".join(f"{name} {v:.0f}%" for name, v in limits if v is not None and v >= HOST_LIMIT_PERCENT)
        out.append(f"  {exp:<6} {host:<5} {row.get('ca') or '':<11} {row.get('rate') or '':>12}  {rtt_ms:>7}  "
                   f"{retrans:<7}  {limited}".rstrip())
    return out

__all__ = [
    "Field",
    "OPS",
    "aggregate",
    "append_rows",
    "default_fields_text",
    "load_fields",
    "parse_fields",
    "parse_number",
    "parse_other",
    "rate_table",
    "read_header",
    "read_rows",
]
