"""Running tc: root qdisc records, read-backs and rebuilds, device checks, the netem fallback.

Subprocesses get argv lists, never a shell.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping

from netesto.agent.journal import REBUILD, rebuild_args
from netesto.errors import AgentError, PolicyError

SYS_NET = Path("/sys/class/net")
_DEV = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")


def default_dev() -> str:
    """The interface of the default route, else the first non-loopback interface."""
    try:
        for line in Path("/proc/net/route").read_text().splitlines()[1:]:
            parts = line.split()
            if len(parts) > 2 and parts[1] == "00000000":
                return parts[0]
    except OSError:
        pass
    devs = sorted(p.name for p in SYS_NET.iterdir() if p.name != "lo") if SYS_NET.is_dir() else []
    if not devs:
        raise AgentError("no network interface to use (give dev=...)", kind="UsageError")
    return devs[0]



def check_dev(dev: str) -> str:
    """``dev`` (the default route's if empty) checked: a plain device name that exists here."""
    dev = dev or default_dev()
    if not _DEV.match(dev):
        raise PolicyError(f"bad device name {dev!r}", kind="PolicyError")
    if not (SYS_NET / dev).exists():
        have = ", ".join(sorted(p.name for p in SYS_NET.iterdir())) if SYS_NET.is_dir() else ""
        raise AgentError(f"no network device {dev!r} here (have: {have})", kind="UsageError")
    return dev


def run(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (no shell) for ``what``; AgentError if the tool is missing or hangs."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except FileNotFoundError as exc:
        raise AgentError(f"{what}: {argv[0]} is not installed on this host", kind="Unavailable") from exc
    except subprocess.TimeoutExpired as exc:
        raise AgentError(f"{what}: {' '.join(argv)} did not finish in 20 s", kind="ControlError") from exc
    return proc



def apply(argv: list[str], what: str) -> None:
    """Run ``tc argv``; AgentError with tc's complaint if it fails."""
    proc = run(["tc", *argv], what)
    if proc.returncode != 0:
        raise AgentError(f"{what}: tc {' '.join(argv)} failed: {proc.stderr.strip()}", kind="ControlError",
                         detail={"argv": ["tc", *argv], "stderr": proc.stderr})


def qdisc_record(dev: str) -> dict[str, Any]:
    """What restore needs to put ``dev``'s root qdisc back: its kind, handle and options
    from ``tc -j``, its ``tc qdisc show`` text, and for a tree its classes and filters."""
    proc = run(["tc", "-j", "qdisc", "show", "dev", dev], "tc qdisc show")
    try:
        rows = [r for r in json.loads(proc.stdout or "[]") if isinstance(r, dict)]
    except ValueError:
        rows = []
    root = next((r for r in rows if r.get("root")), None)
    # The kernel's own root (mq, default_qdisc, noqueue) has handle 0:; anything set up has another.
    if root is None or root.get("handle") == "0:":
        return {"default": True, "kind": str(root.get("kind", "")) if root else ""}
    show = run(["tc", "qdisc", "show", "dev", dev], "tc qdisc show").stdout
    record: dict[str, Any] = {
        "default": False, "kind": str(root.get("kind", "")), "handle": str(root.get("handle", "")),
        "options": root.get("options", {}),
        "show": "; ".join(" ".join(line.split()) for line in show.splitlines() if line.strip()),
        # Children of the root (ingress/clsact hang off ffff:fff1 and are left alone).
        "children": sum(1 for r in rows if r is not root and r.get("parent") != "ffff:fff1"),
    }
    if record["children"] or record["kind"] not in REBUILD:
        # tc -j class show prints text, not JSON (iproute2 6.1): keep the text, for the report.
        for what in ("class", "filter"):
            out = run(["tc", what, "show", "dev", dev], f"tc {what} show").stdout
            record[what] = "; ".join(" ".join(line.split()) for line in out.splitlines() if line.strip())
    return record


def root_kind(dev: str) -> str:
    """The kind of ``dev``'s root qdisc ("" if tc does not say)."""
    proc = run(["tc", "-j", "qdisc", "show", "dev", dev, "root"], "tc qdisc show")
    try:
        rows = json.loads(proc.stdout or "[]")
        return str(rows[0].get("kind", "")) if rows else ""
    except (ValueError, IndexError, AttributeError):
        return ""


def qdisc_show(dev: str) -> str:
    """``tc qdisc show dev`` on one line (or why it could not be shown)."""
    try:
        out = run(["tc", "qdisc", "show", "dev", dev], "tc qdisc show").stdout
    except AgentError as exc:
        return exc.message
    return "; ".join(" ".join(line.split()) for line in out.splitlines() if line.strip())


def rebuild_qdisc(dev: str, entry: Mapping[str, Any]) -> str:
    """Recreate a recorded classless root qdisc; "" if tc reads it back the same, else what differs."""
    want = {"kind": entry["kind"], "handle": entry["handle"], "options": entry["options"]}
    got: Any = None

    def replace_root(args: list[str]) -> Any:
        nonlocal got
        apply(["qdisc", "replace", "dev", dev, "root", "handle", entry["handle"], entry["kind"], *args],
                 f"restore qdisc on {dev}")
        proc = run(["tc", "-j", "qdisc", "show", "dev", dev, "root"], "tc qdisc show")
        try:
            row = json.loads(proc.stdout or "[]")[0]
            got = {"kind": row.get("kind"), "handle": row.get("handle"), "options": row.get("options", {})}
        except (ValueError, IndexError, AttributeError):
            got = proc.stdout.strip()
        return got

    if entry["kind"] != "tbf":
        replace_root(rebuild_args(entry))
    else:
        # tc's JSON gives tbf's burst and latency rounded (the kernel keeps clock ticks
        # and a byte limit): search for the burst, then the latency, that read back as
        # recorded (the limit, in bytes, sets the latency). Each read-back grows with its input.
        opts = entry["options"]
        rate, burst, lat = int(opts["rate"]), int(opts["burst"]), int(opts["lat"])

        def tbf(name: str, b: int, limit: int) -> int | None:
            back = replace_root(["rate", f"{rate * 8}bit", "burst", f"{b}b", "limit", f"{limit}b"])
            return back["options"].get(name) if isinstance(back, dict) else None

        # The kernel keeps the byte limit; tc shows it as latency = limit / rate - burst time.
        limit = rate * lat // 10**6 + burst
        found = _search(burst, burst + 1, lambda b: tbf("burst", b, limit))
        if found is not None and got != want:
            _search(lat, limit, lambda lim: tbf("lat", found, lim), tries=24, per=rate / 10**6)
    return "" if got == want else f"tc reads back {got}, not {want}"


def _search(want: int, first: int, probe: Callable[[int], int | None], tries: int = 12,
            per: float = 1.0) -> int | None:
    """The input whose read-back (non-decreasing in it) is ``want``: steps by the miss
    (``per`` input units a read-back unit), then bisects."""
    lo: int | None = None
    hi: int | None = None
    x = first
    for _ in range(tries):
        got = probe(x)
        if got is None:
            return None
        if got == want:
            return x
        if got < want:
            lo = x
        else:
            hi = x
        if lo is not None and hi is not None:
            if hi - lo <= 1:
                return None
            x = (lo + hi) // 2
        else:
            x += int((want - got) * per) or (1 if want > got else -1)
    return None



def netem_fallback(spec: str) -> Callable[..., Any] | None:
    """The replaceable userspace delay line ``spec``, ``"module:function"`` (None if "")."""
    if not spec:
        return None
    module, _, func = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), func or "netem_fallback")
    except (ImportError, AttributeError) as exc:
        raise AgentError(f"NETESTO_NETEM_FALLBACK={spec!r} cannot be loaded: {exc}", kind="Unavailable") from exc



__all__ = ["SYS_NET", "apply", "check_dev", "default_dev", "netem_fallback", "qdisc_record", "qdisc_show",
           "rebuild_qdisc", "root_kind", "run"]
