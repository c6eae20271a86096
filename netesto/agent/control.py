"""Host control with allowlists: sysctls, module parameters, tc qdiscs/netem, tcpdump; a restore journal.

Every change is recorded (original value first) in a journal on disk before it
is made, so :meth:`HostControl.restore` can undo it even after the agent was
restarted. Subprocesses get argv lists, never a shell.
"""

from __future__ import annotations

import errno
import importlib
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from netesto.errors import AgentError, PolicyError
from netesto.policy import MODULE_PARAMS, QDISC_ACTIONS, QDISCS, SYSCTLS, check_sysctl, describe, qdisc_other_words
from netesto.protocol.names import is_name

log = logging.getLogger("netesto.agent.control")

PROC_SYS = Path(os.environ.get("NETESTO_PROC_SYS", "/proc/sys"))
SYS_MODULE = Path("/sys/module")
SYS_NET = Path("/sys/class/net")

_CA_NAME = re.compile(r"^[a-z0-9_]{1,16}$")
_QDISC_NAME = re.compile(r"^[a-z0-9_]{1,16}$")


_RATE = re.compile(r"^\d+(\.\d+)?([KkMmGgTt]i?)?(bit|bps)?$")
_BURST = re.compile(r"^\d+(\.\d+)?([KkMmGg]i?)?[bB]?$")
_LIMIT = re.compile(r"^\d+([KkMm]?[bB]?)?$")
_DEV = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")
TCPDUMP_START_WAIT = 10.0  # seconds for tcpdump to say "listening on" (name lookups can be slow)


def sysctl_path(name: str) -> Path:
    return PROC_SYS / name.replace(".", "/")


def parse_sysctl_values(value: Any) -> list[str]:
    """``"4096 16384 4194304"``, ``"4096,16384,4194304"`` or a list -> list of text values."""
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    return [v for v in re.split(r"[\s,]+", str(value).strip()) if v]


def normalize_settings(settings: Mapping[str, Any] | Sequence[Any]) -> list[tuple[str, list[str]]]:
    """A map or ``[(name, values)]`` (the script's SetSysctl.settings) -> checked pairs."""
    items = settings.items() if isinstance(settings, Mapping) else settings
    for item in items if not isinstance(settings, Mapping) else ():
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise AgentError(f"bad sysctl setting {item!r}: expected [name, value]", kind="UsageError")
    return [(str(name), parse_sysctl_values(value)) for name, value in items]


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


class Journal:
    """What we changed, with the original values, persisted as JSON after every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, dict[str, Any]] = {"sysctl": {}, "module": {}, "qdisc": {}, "netem_fallback": {}}
        if path.exists():
            try:
                loaded = json.loads(path.read_text())
                for key in self.data:
                    entries = loaded.get(key, {})
                    # A qdisc entry is the original root's record (a map); older journals hold its kind.
                    ok = (str, dict) if key == "qdisc" else str
                    if not isinstance(entries, dict) or not all(isinstance(v, ok) for v in entries.values()):
                        raise ValueError(f"{key!r} is not a map of original values")
                    self.data[key].update(entries)
            except (OSError, ValueError, AttributeError) as exc:
                # Kept aside, not overwritten by the next save: what it says is all anyone
                # has left to restore this host by hand.
                bad = path.with_name(path.name + ".bad")
                try:
                    os.replace(path, bad)
                except OSError:
                    pass
                self.data = {key: {} for key in self.data}
                log.error("restore journal %s is unreadable (%s): kept as %s for a restore by hand; "
                          "starting a new one", path, exc, bad)

    def record(self, kind: str, key: str, original: Any) -> None:
        if key not in self.data[kind]:  # the first original is the one to restore
            self.data[kind][key] = original
            self.save()

    def forget(self, kind: str, key: str) -> None:
        self.data[kind].pop(key, None)
        self.save()

    def empty(self) -> bool:
        return not any(self.data.values())

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


# Root qdiscs restore can recreate from tc's JSON, each checked here by reading it back.
# (fq, fq_codel, sfq, cake... are not in this kernel, so not verified: restore reports them.)
REBUILD = ("bfifo", "pfifo", "pfifo_fast", "noqueue", "tbf")
_REBUILD_OPTIONS = {"bfifo": {"limit"}, "pfifo": {"limit"}, "pfifo_fast": {"bands", "priomap", "multiqueue"},
                    "noqueue": set(), "tbf": {"rate", "burst", "lat"}}


def _unrebuildable(entry: Mapping[str, Any]) -> str:
    """Why a recorded (non-default) root qdisc cannot be recreated exactly; "" if it can."""
    kind = entry.get("kind", "")
    if entry.get("children") or entry.get("class") or entry.get("filter"):
        return f"a {kind} tree with classes, child qdiscs or filters is not rebuilt"
    if kind not in REBUILD:
        return f"restore does not rebuild a {kind} qdisc (it rebuilds {', '.join(REBUILD)})"
    options = entry.get("options")
    if not isinstance(options, dict) or set(options) - _REBUILD_OPTIONS[kind]:
        return f"its options {options} include some tc's JSON does not give back in full (e.g. a tbf peakrate)"
    if not re.fullmatch(r"[0-9a-f]{1,4}:", str(entry.get("handle", ""))):
        return f"its handle {entry.get('handle')!r} is not one tc accepts back"
    return ""


def _rebuild_args(entry: Mapping[str, Any]) -> list[str]:
    """tc arguments after the kind that recreate the recorded options of a bfifo, pfifo, pfifo_fast or noqueue."""
    opts = entry["options"]
    if entry["kind"] in ("bfifo", "pfifo") and "limit" in opts:
        return ["limit", str(int(opts["limit"]))]
    return []  # pfifo_fast and noqueue take no options; the read-back checks the defaults match


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


def _tree_text(entry: Mapping[str, Any]) -> str:
    parts = [f"{what}es '{entry[what]}'" if what == "class" else f"{what}s '{entry[what]}'"
             for what in ("class", "filter") if entry.get(what)]
    return f" with {' and '.join(parts)}" if parts else ""


def _run(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except FileNotFoundError as exc:
        raise AgentError(f"{what}: {argv[0]} is not installed on this host", kind="Unavailable") from exc
    except subprocess.TimeoutExpired as exc:
        raise AgentError(f"{what}: {' '.join(argv)} did not finish in 20 s", kind="ControlError") from exc
    return proc


def netem_fallback() -> Callable[..., Any] | None:
    """The replaceable userspace delay line: ``NETESTO_NETEM_FALLBACK="module:function"``."""
    spec = os.environ.get("NETESTO_NETEM_FALLBACK", "")
    if not spec:
        return None
    module, _, func = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), func or "netem_fallback")
    except (ImportError, AttributeError) as exc:
        raise AgentError(f"NETESTO_NETEM_FALLBACK={spec!r} cannot be loaded: {exc}", kind="Unavailable") from exc


class HostControl:
    """Applies allowlisted changes to this host (or namespace) and undoes them."""

    def __init__(self, journal_path: Path, host: str) -> None:
        self.journal = Journal(journal_path)
        self.host = host
        self.tcpdumps: dict[str, list[subprocess.Popen]] = {}
        self._pcaps: dict[int, Path] = {}  # tcpdump pid -> the pcap it writes

    # ---- sysctl
    def check_sysctls(self, settings: Mapping[str, Any] | Sequence[Any]) -> list[tuple[str, str]]:
        """Validate every setting against the allowlist first: all or nothing."""
        out = []
        for name, values in normalize_settings(settings):
            if name not in SYSCTLS:
                allowed = ", ".join(f"{n} ({describe(n)})" for n in SYSCTLS)
                raise PolicyError(f"sysctl {name} is not allowed; allowed: {allowed}",
                                  kind="PolicyError", detail={"name": name, "allowed": list(SYSCTLS)})
            try:
                out.append((name, check_sysctl(name, values)))
            except ValueError as exc:
                raise PolicyError(f"sysctl {name}={' '.join(values)} refused: {exc} "
                                  f"(allowed: {describe(name)})",
                                  kind="PolicyError", detail={"name": name, "allowed": list(SYSCTLS)}) from exc
        return out

    def set_sysctl(self, settings: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
        applied = {}
        for name, value in self.check_sysctls(settings):
            path = sysctl_path(name)
            try:
                original = " ".join(path.read_text().split())
            except FileNotFoundError as exc:
                raise AgentError(f"sysctl {name} does not exist here (inside a network namespace only "
                                 "per-namespace sysctls exist)", kind="ControlError") from exc
            self.journal.record("sysctl", name, original)
            try:
                with open(path, "w") as f:
                    f.write(value + "\n")
            except OSError as exc:
                self._forget_if_unchanged("sysctl", name, original)
                hint = ""
                if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    hint = " (read-only here: inside a network namespace it can only be set from the initial namespace)"
                elif "congestion" in name:
                    avail = PROC_SYS / "net/ipv4/tcp_available_congestion_control"
                    hint = f" (available: {avail.read_text().strip()})" if avail.exists() else ""
                raise AgentError(f"the kernel refused {name}={value}: {exc.strerror or exc}{hint}",
                                 kind="ControlError", detail={"name": name, "errno": exc.errno}) from exc
            applied[name] = " ".join(path.read_text().split())
            log.info("sysctl %s=%s (was %s)", name, applied[name], original)
        return {"applied": applied}

    def _forget_if_unchanged(self, kind: str, key: str, original: str) -> None:
        try:
            if kind == "sysctl" and " ".join(sysctl_path(key).read_text().split()) == original:
                self.journal.forget(kind, key)
        except OSError:
            pass

    # ---- module parameters
    def set_module_params(self, module: str, params: Mapping[str, Any]) -> dict[str, Any]:
        allowed = MODULE_PARAMS.get(module)
        if allowed is None:
            raise PolicyError(f"module {module!r} is not allowed; allowed: {', '.join(MODULE_PARAMS)}",
                              kind="PolicyError", detail={"allowed": MODULE_PARAMS})
        for p, v in params.items():
            if p not in allowed:
                raise PolicyError(f"parameter {p!r} of {module} is not allowed; allowed: {', '.join(allowed)}",
                                  kind="PolicyError", detail={"allowed": list(allowed)})
            if not re.fullmatch(r"-?\d{1,10}|[YN]", str(v)):
                raise PolicyError(f"{module}.{p}={v!r} refused: expected an integer or Y/N", kind="PolicyError")
        base = SYS_MODULE / module / "parameters"
        if not base.is_dir():
            raise AgentError(f"module {module} is not loaded on this host ({base} does not exist)", kind="Unavailable")
        applied = {}
        for p, v in params.items():
            path = base / p
            try:
                original = path.read_text().strip()
                self.journal.record("module", str(path), original)
                path.write_text(f"{v}\n")
            except OSError as exc:
                raise AgentError(f"cannot set {module}.{p}={v}: {exc.strerror or exc}", kind="ControlError") from exc
            applied[p] = path.read_text().strip()
        return {"applied": applied}

    # ---- tc
    def _check_dev(self, dev: str) -> str:
        dev = dev or default_dev()
        if not _DEV.match(dev):
            raise PolicyError(f"bad device name {dev!r}", kind="PolicyError")
        if not (SYS_NET / dev).exists():
            have = ", ".join(sorted(p.name for p in SYS_NET.iterdir())) if SYS_NET.is_dir() else ""
            raise AgentError(f"no network device {dev!r} here (have: {have})", kind="UsageError")
        return dev

    def _tc(self, argv: list[str], what: str) -> None:
        proc = _run(["tc", *argv], what)
        if proc.returncode != 0:
            raise AgentError(f"{what}: tc {' '.join(argv)} failed: {proc.stderr.strip()}", kind="ControlError",
                             detail={"argv": ["tc", *argv], "stderr": proc.stderr})

    def _qdisc_record(self, dev: str) -> dict[str, Any]:
        """What restore needs to put ``dev``'s root qdisc back: its kind, handle and options
        from ``tc -j``, its ``tc qdisc show`` text, and for a tree its classes and filters."""
        proc = _run(["tc", "-j", "qdisc", "show", "dev", dev], "tc qdisc show")
        try:
            rows = [r for r in json.loads(proc.stdout or "[]") if isinstance(r, dict)]
        except ValueError:
            rows = []
        root = next((r for r in rows if r.get("root")), None)
        # The kernel's own root (mq, default_qdisc, noqueue) has handle 0:; anything set up has another.
        if root is None or root.get("handle") == "0:":
            return {"default": True, "kind": str(root.get("kind", "")) if root else ""}
        show = _run(["tc", "qdisc", "show", "dev", dev], "tc qdisc show").stdout
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
                out = _run(["tc", what, "show", "dev", dev], f"tc {what} show").stdout
                record[what] = "; ".join(" ".join(line.split()) for line in out.splitlines() if line.strip())
        return record

    def _record_qdisc(self, dev: str) -> list[str]:
        """Journal ``dev``'s root qdisc before the first change; warnings if restore cannot rebuild it."""
        if dev not in self.journal.data["qdisc"]:
            self.journal.record("qdisc", dev, self._qdisc_record(dev))
        entry = self.journal.data["qdisc"][dev]
        why = _unrebuildable(entry) if isinstance(entry, dict) and not entry.get("default") else ""
        if not why:
            return []
        return [f"the root qdisc of {dev} before this change ({entry.get('show')}) cannot be rebuilt "
                f"exactly by restore ({why}): restore will delete the root qdisc, so the kernel default comes back"]

    def _rebuild_qdisc(self, dev: str, entry: Mapping[str, Any]) -> str:
        """Recreate a recorded classless root qdisc; "" if tc reads it back the same, else what differs."""
        want = {"kind": entry["kind"], "handle": entry["handle"], "options": entry["options"]}
        got: Any = None

        def apply(args: list[str]) -> Any:
            nonlocal got
            self._tc(["qdisc", "replace", "dev", dev, "root", "handle", entry["handle"], entry["kind"], *args],
                     f"restore qdisc on {dev}")
            proc = _run(["tc", "-j", "qdisc", "show", "dev", dev, "root"], "tc qdisc show")
            try:
                row = json.loads(proc.stdout or "[]")[0]
                got = {"kind": row.get("kind"), "handle": row.get("handle"), "options": row.get("options", {})}
            except (ValueError, IndexError, AttributeError):
                got = proc.stdout.strip()
            return got

        if entry["kind"] != "tbf":
            apply(_rebuild_args(entry))
        else:
            # tc's JSON gives tbf's burst and latency rounded (the kernel keeps clock ticks
            # and a byte limit): search for the burst, then the latency, that read back as
            # recorded (the limit, in bytes, sets the latency). Each read-back grows with its input.
            opts = entry["options"]
            rate, burst, lat = int(opts["rate"]), int(opts["burst"]), int(opts["lat"])

            def tbf(name: str, b: int, limit: int) -> int | None:
                back = apply(["rate", f"{rate * 8}bit", "burst", f"{b}b", "limit", f"{limit}b"])
                return back["options"].get(name) if isinstance(back, dict) else None

            # The kernel keeps the byte limit; tc shows it as latency = limit / rate - burst time.
            limit = rate * lat // 10**6 + burst
            found = _search(burst, burst + 1, lambda b: tbf("burst", b, limit))
            if found is not None and got != want:
                _search(lat, limit, lambda lim: tbf("lat", found, lim), tries=24, per=rate / 10**6)
        return "" if got == want else f"tc reads back {got}, not {want}"

    def _root_kind(self, dev: str) -> str:
        proc = _run(["tc", "-j", "qdisc", "show", "dev", dev, "root"], "tc qdisc show")
        try:
            rows = json.loads(proc.stdout or "[]")
            return str(rows[0].get("kind", "")) if rows else ""
        except (ValueError, IndexError, AttributeError):
            return ""

    def qdisc_argv(self, dev: str, qdisc: str, action: str = "", rate: str = "", burst: str = "", limit: str = "",
                   other: str = "") -> list[list[str]]:
        """The ``tc`` argument lists for a SET_QDISC, after validating every field."""
        if action not in QDISC_ACTIONS:
            raise PolicyError(f"qdisc action {action!r} is not allowed; allowed: {', '.join(a or '(empty)' for a in QDISC_ACTIONS)}",
                              kind="PolicyError")
        if action in ("del", "delete"):
            return [["qdisc", "del", "dev", dev, "root"]]
        if qdisc not in QDISCS:
            raise PolicyError(f"qdisc {qdisc!r} is not allowed; allowed: {', '.join(QDISCS)}", kind="PolicyError",
                              detail={"allowed": list(QDISCS)})
        for field_name, value, pattern in (("rate", rate, _RATE), ("burst", burst, _BURST), ("limit", limit, _LIMIT)):
            if value and not pattern.match(value):
                raise PolicyError(f"qdisc {field_name} {value!r} is not valid (e.g. rate 100mbit, burst 15k, limit 300000)",
                                  kind="PolicyError")
        try:
            tokens = qdisc_other_words(other)  # the rule the script's plan checks too
        except ValueError as exc:
            raise PolicyError(f"qdisc other {other[:80]!r} is not valid: {exc}", kind="PolicyError") from None
        verb = action or "replace"
        if qdisc == "htb" and rate:
            # htb takes its rate on a class: root htb -> class 1:1 -> optional bfifo leaf sized in bytes.
            cmds = [["qdisc", verb, "dev", dev, "root", "handle", "1:", "htb", "default", "1", "r2q", "1000", *tokens],
                    ["class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate,
                     *(["burst", burst, "cburst", burst] if burst else [])]]
            if limit:
                cmds.append(["qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit", limit])
            return cmds
        argv = ["qdisc", verb, "dev", dev, "root", qdisc]
        for name, value in (("rate", rate), ("burst", burst), ("limit", limit)):
            if value:
                argv += [name, value]
        return [argv + tokens]

    def set_qdisc(self, dev: str, qdisc: str, action: str = "", rate: str = "", burst: str = "", limit: str = "",
                  other: str = "") -> dict[str, Any]:
        dev = self._check_dev(dev)
        cmds = self.qdisc_argv(dev, qdisc, action, rate, burst, limit, other)
        had_entry = dev in self.journal.data["qdisc"]
        warnings = self._record_qdisc(dev)
        if action in ("", "replace") and qdisc == "htb" and rate:
            # Replacing an htb root in place keeps stale classes; start clean.
            _run(["tc", "qdisc", "del", "dev", dev, "root"], "tc qdisc del")
        for argv in cmds:
            try:
                self._tc(argv, f"set qdisc {qdisc} on {dev}")
            except AgentError:
                # tc refused and changed nothing: restore must not delete the root that is
                # still the host's own (a tree it could not rebuild would be lost).
                if not had_entry and self._qdisc_record(dev) == self.journal.data["qdisc"].get(dev):
                    self.journal.forget("qdisc", dev)
                raise
        log.info("qdisc on %s: %s", dev, " ; ".join(" ".join(a) for a in cmds))
        reply = {"dev": dev, "argv": [["tc", *a] for a in cmds], "kind": self._root_kind(dev)}
        if warnings:
            reply["warnings"] = warnings
        return reply

    def set_netem(self, dev: str, delay: float, jitter: float = 0.0, loss: float = 0.0, rate: int = 0,
                  limit: int = 1000) -> dict[str, Any]:
        dev = self._check_dev(dev)
        checks = (("delay", delay, 0, 60000), ("jitter", jitter, 0, 60000), ("loss", loss, 0, 100),
                  ("rate", rate, 0, 10**12), ("limit", limit, 1, 10**7))
        for name, value, lo, hi in checks:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise PolicyError(f"netem {name}={value!r} is outside {lo}..{hi}", kind="PolicyError")
        root = self._root_kind(dev)
        if not (delay or jitter or loss or rate):
            # As the original: delay 0 = no netem. Undo only what netem (or the fallback)
            # put there: another root qdisc (the testbed's htb bottleneck) is not ours.
            if root != "netem":
                fallback = netem_fallback()
                if fallback is None:
                    return {"dev": dev, "argv": []}
                result = fallback(dev, 0, 0, 0, 0, limit)  # all zeros = the delay line's own setting
                self.journal.forget("netem_fallback", dev)
                return {"dev": dev, "fallback": os.environ["NETESTO_NETEM_FALLBACK"], "result": result}
            self._record_qdisc(dev)
            _run(["tc", "qdisc", "del", "dev", dev, "root"], "tc qdisc del")
            return {"dev": dev, "argv": [["tc", "qdisc", "del", "dev", dev, "root"]]}
        argv = ["qdisc", "replace", "dev", dev, "root", "netem", "limit", str(int(limit)), "delay", f"{delay}ms"]
        if jitter:
            argv.append(f"{jitter}ms")
        if loss:
            argv += ["loss", f"{loss}%"]
        if rate:
            argv += ["rate", f"{int(rate)}bit"]
        # Journaled before the change (a crash between the two still restores), and
        # forgotten again if tc refused: when the fallback does the work, restore must
        # not delete the root qdisc that was there (the testbed's htb bottleneck).
        had_entry = dev in self.journal.data["qdisc"]
        warnings = self._record_qdisc(dev)
        proc = _run(["tc", *argv], "set netem")
        if proc.returncode == 0:
            return {"dev": dev, "argv": [["tc", *argv]], **({"warnings": warnings} if warnings else {})}
        if not had_entry:
            self.journal.forget("qdisc", dev)
        if "netem" not in root and re.search(r"unknown|not found|No such file|Error: Specified qdisc",
                                             proc.stderr, re.I):
            fallback = netem_fallback()
            if fallback is None:
                raise AgentError(f"netem is unavailable on this host (tc: {proc.stderr.strip()}); "
                                 "set NETESTO_NETEM_FALLBACK=module:function for a userspace delay line",
                                 kind="Unavailable", detail={"argv": ["tc", *argv]})
            # Restore calls the fallback with delay 0 for this entry.
            self.journal.record("netem_fallback", dev, os.environ["NETESTO_NETEM_FALLBACK"])
            result = fallback(dev, delay, jitter, loss, rate, limit)
            return {"dev": dev, "fallback": os.environ["NETESTO_NETEM_FALLBACK"], "result": result}
        raise AgentError(f"set netem on {dev}: {proc.stderr.strip()}", kind="ControlError")

    # ---- tcpdump
    def tcpdump_start(self, exp_dir: Path, exp: str, dev: str, server: str, packets: int) -> dict[str, Any]:
        tool = shutil.which("tcpdump")
        if tool is None:
            raise AgentError("tcpdump is not installed on this host", kind="Unavailable")
        dev = self._check_dev(dev)
        server = server or "X"
        if not is_name(server, 253):  # a leading "-" would be read by tcpdump as an option
            raise PolicyError(f"bad tcpdump server {server!r}", kind="PolicyError")
        if not isinstance(packets, int) or not 1 <= packets <= 10**8:
            raise PolicyError(f"tcpdump packets={packets!r} is outside 1..100000000", kind="PolicyError")
        short = re.split(r"[^a-z0-9]", self.host.lower())[0] or "host"
        try:  # an address stays whole: its first label would give 10.0.0.2 and 10.0.0.3 one file
            label = str(ipaddress.ip_address(server)).replace(":", "_")
        except ValueError:
            label = re.split(r"[^A-Za-z0-9]", server)[0]  # a host name: its short name, as the original
        target = exp_dir / f"{short}-{label}.pcap"
        for other in self.tcpdumps.get(exp, []):
            if other.poll() is None and self._pcaps.get(other.pid) == target:
                raise AgentError(f"a tcpdump writing {target.name} in experiment {exp} is running (pid {other.pid}); "
                                 "stop it first", kind="Busy")
        # --immediate-mode -U: without them libpcap hands packets over in ~1 s blocks
        # and a stop right after the traffic loses the last of them.
        # -Z root: as root, tcpdump switches to its own user, which clears the parent-death
        # signal, so a killed agent left it capturing on. With -w it only copies packets (no
        # dissection). Without root (capabilities only) it switches to no one anyway.
        keep_user = ["-Z", "root"] if os.geteuid() == 0 else []
        argv = [tool, *keep_user, "-K", "-s", "128", "-c", str(packets), "--immediate-mode", "-U", "-i", dev]
        if server != "X":
            argv += ["host", server]
        argv += ["-w", str(target)]
        from netesto.procs import parent_death_signal

        # stderr to a file (a pipe nobody reads could block tcpdump's exit report).
        errpath = self.journal.path.parent / f"tcpdump-{exp}-{target.stem}.stderr"
        with open(errpath, "wb") as errfile:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errfile,
                                    preexec_fn=parent_death_signal())
        # Reply only once the capture is armed ("listening on ..."): the flows start
        # right after this reply and their first packets belong in the pcap; and a
        # tcpdump that fails at once (unknown host, bad device) is reported, not hidden.
        deadline = time.monotonic() + TCPDUMP_START_WAIT
        while proc.poll() is None and time.monotonic() < deadline:
            if b"listening on" in errpath.read_bytes():
                break
            time.sleep(0.01)
        if proc.poll() is not None:
            text = " ".join(errpath.read_text(errors="replace").split())[-600:]
            raise AgentError(f"tcpdump on {dev} exited with status {proc.returncode} at start: {text or '(no output)'}",
                             kind="ToolError", detail={"argv": argv, "returncode": proc.returncode})
        if b"listening on" not in errpath.read_bytes():
            log.warning("tcpdump pid %d on %s: not listening after %.0f s; going on", proc.pid, dev,
                        TCPDUMP_START_WAIT)
        self._pcaps[proc.pid] = target
        self.tcpdumps.setdefault(exp, []).append(proc)
        return {"pid": proc.pid, "path": target.name, "argv": argv}

    def tcpdumps_running(self, exp: str) -> list[int]:
        """PIDs of ``exp``'s tcpdumps still capturing (their pcaps still grow)."""
        return [p.pid for p in self.tcpdumps.get(exp, []) if p.poll() is None]

    def tcpdump_stop(self, exp: str | None = None) -> dict[str, Any]:
        stopped = []
        for key in list(self.tcpdumps):
            if exp is None or key == exp:
                for proc in self.tcpdumps.pop(key):
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGINT)  # tcpdump flushes its file on SIGINT
                        try:
                            proc.wait(timeout=3)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait()
                    stopped.append(proc.pid)
                    self._pcaps.pop(proc.pid, None)
        return {"stopped": stopped}

    def _qdisc_show(self, dev: str) -> str:
        try:
            out = _run(["tc", "qdisc", "show", "dev", dev], "tc qdisc show").stdout
        except AgentError as exc:
            return exc.message
        return "; ".join(" ".join(line.split()) for line in out.splitlines() if line.strip())

    # ---- restore
    def restore(self) -> dict[str, Any]:
        """Undo every journaled change (newest state back to the first original)."""
        restored: list[str] = []
        errors: list[str] = []
        for dev, spec in list(self.journal.data["netem_fallback"].items()):
            try:
                fallback = netem_fallback()
                if fallback is not None:
                    fallback(dev, 0, 0, 0, 0, 1000)  # delay 0 removes the delay line
                restored.append(f"netem fallback on {dev}")
            except Exception as exc:
                errors.append(f"netem fallback on {dev}: {exc}")
            self.journal.forget("netem_fallback", dev)
        for dev, original in list(self.journal.data["qdisc"].items()):
            try:
                proc = _run(["tc", "qdisc", "del", "dev", dev, "root"], "restore qdisc")
            except AgentError as exc:  # no tc, or it hung: keep the entry for a restore that can work
                errors.append(f"qdisc on {dev}: {exc.message}")
                continue
            # "Cannot delete qdisc with handle of zero" = already the default root.
            if proc.returncode != 0 and "handle of zero" not in proc.stderr and "No such file" not in proc.stderr:
                if "Cannot find device" not in proc.stderr:
                    errors.append(f"qdisc on {dev}: {proc.stderr.strip()}")
                    continue
                restored.append(f"qdisc on {dev} (device gone)")
            elif not isinstance(original, dict) or original.get("default"):
                restored.append(f"qdisc on {dev}")  # deleting the root brought the default back
            else:
                why = _unrebuildable(original)
                if not why:
                    try:
                        why = self._rebuild_qdisc(dev, original)
                    except (AgentError, ValueError, TypeError, KeyError, AttributeError) as exc:
                        # tc refused, or the record is damaged: the default is the safe state.
                        why = exc.message if isinstance(exc, AgentError) else f"its record is damaged ({exc!r})"
                        _run(["tc", "qdisc", "del", "dev", dev, "root"], "restore qdisc")
                if why:
                    # Never silent: the host is not as it was, and someone has to put it back by hand.
                    errors.append(f"qdisc on {dev}: NOT restored exactly: it was '{original.get('show')}'"
                                  f"{_tree_text(original)}; {why}; {dev} now has "
                                  f"'{self._qdisc_show(dev)}'")
                    log.error("restore: %s", errors[-1])
                else:
                    restored.append(f"qdisc on {dev} ({original.get('show')})")
            self.journal.forget("qdisc", dev)
        # Sysctls and module parameters are both files holding their original text.
        for kind, path_of in (("sysctl", sysctl_path), ("module", Path)):
            for key, original in list(self.journal.data[kind].items()):
                try:
                    path_of(key).write_text(original + "\n")
                    restored.append(f"{key}={original}")
                    self.journal.forget(kind, key)
                except OSError as exc:
                    errors.append(f"{key}: {exc}")
        if restored or errors:
            log.info("restored: %s%s", ", ".join(restored) or "nothing", f"; errors: {errors}" if errors else "")
        return {"restored": restored, "errors": errors}


__all__ = ["HostControl", "Journal", "MODULE_PARAMS", "QDISCS", "SYSCTLS", "default_dev", "netem_fallback"]
