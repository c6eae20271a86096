"""Host control with allowlists: sysctls, module parameters, tc qdiscs/netem, tcpdump; undone by restore.

:class:`HostControl` checks each change against :mod:`netesto.policy`, records
the original in the :class:`~netesto.agent.journal.Journal` before it makes the
change (:mod:`netesto.agent.tc` runs tc) and undoes every journaled change in
:meth:`HostControl.restore`, even after the agent was restarted.
"""

from __future__ import annotations

import errno
import logging
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from netesto.agent import tc
from netesto.agent.journal import Journal, tree_text, unrebuildable
from netesto.agent.tcpdump import Tcpdumps
from netesto.errors import AgentError, PolicyError
from netesto.policy import MODULE_PARAMS, QDISC_ACTIONS, QDISCS, SYSCTLS, check_sysctl, describe, qdisc_other_words
from netesto.protocol.replies import (
    ModuleParamsReply,
    NetemReply,
    QdiscReply,
    RestoreReply,
    SysctlReply,
    TcpdumpStartReply,
    TcpdumpStopReply,
)

log = logging.getLogger("netesto.agent.control")

PROC_SYS = Path("/proc/sys")
SYS_MODULE = Path("/sys/module")

_RATE = re.compile(r"^\d+(\.\d+)?([KkMmGgTt]i?)?(bit|bps)?$")
_BURST = re.compile(r"^\d+(\.\d+)?([KkMmGg]i?)?[bB]?$")
_LIMIT = re.compile(r"^\d+([KkMm]?[bB]?)?$")


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



class HostControl:
    """Applies allowlisted changes to this host (or namespace) and undoes them.

    ``netem_fallback`` (``"module:function"``, "" for none) is the userspace delay line
    SET_NETEM uses where the kernel has no netem.
    """

    def __init__(self, journal_path: Path, host: str, *, netem_fallback: str = "") -> None:
        self.journal = Journal(journal_path)
        self.host = host
        self.netem_fallback = netem_fallback
        self.tcpdumps = Tcpdumps(journal_path.parent, host)

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

    def set_sysctl(self, settings: Mapping[str, Any] | Sequence[Any]) -> SysctlReply:
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
        return SysctlReply(applied)

    def _forget_if_unchanged(self, kind: str, key: str, original: str) -> None:
        try:
            if kind == "sysctl" and " ".join(sysctl_path(key).read_text().split()) == original:
                self.journal.forget(kind, key)
        except OSError:
            pass

    # ---- module parameters
    def set_module_params(self, module: str, params: Mapping[str, Any]) -> ModuleParamsReply:
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
        return ModuleParamsReply(applied)

    # ---- tc
    def _record_qdisc(self, dev: str) -> list[str]:
        """Journal ``dev``'s root qdisc before the first change; warnings if restore cannot rebuild it."""
        if dev not in self.journal.data["qdisc"]:
            self.journal.record("qdisc", dev, tc.qdisc_record(dev))
        entry = self.journal.data["qdisc"][dev]
        why = unrebuildable(entry) if isinstance(entry, dict) and not entry.get("default") else ""
        if not why:
            return []
        return [f"the root qdisc of {dev} before this change ({entry.get('show')}) cannot be rebuilt "
                f"exactly by restore ({why}): restore will delete the root qdisc, so the kernel default comes back"]

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
                  other: str = "") -> QdiscReply:
        dev = tc.check_dev(dev)
        cmds = self.qdisc_argv(dev, qdisc, action, rate, burst, limit, other)
        had_entry = dev in self.journal.data["qdisc"]
        warnings = self._record_qdisc(dev)
        if action in ("", "replace") and qdisc == "htb" and rate:
            # Replacing an htb root in place keeps stale classes; start clean.
            tc.run(["tc", "qdisc", "del", "dev", dev, "root"], "tc qdisc del")
        for argv in cmds:
            try:
                tc.apply(argv, f"set qdisc {qdisc} on {dev}")
            except AgentError:
                # tc refused and changed nothing: restore must not delete the root that is
                # still the host's own (a tree it could not rebuild would be lost).
                if not had_entry and tc.qdisc_record(dev) == self.journal.data["qdisc"].get(dev):
                    self.journal.forget("qdisc", dev)
                raise
        log.info("qdisc on %s: %s", dev, " ; ".join(" ".join(a) for a in cmds))
        return QdiscReply(dev, [["tc", *a] for a in cmds], tc.root_kind(dev), warnings or None)

    def set_netem(self, dev: str, delay: float, jitter: float = 0.0, loss: float = 0.0, rate: int = 0,
                  limit: int = 1000) -> NetemReply:
        dev = tc.check_dev(dev)
        checks = (("delay", delay, 0, 60000), ("jitter", jitter, 0, 60000), ("loss", loss, 0, 100),
                  ("rate", rate, 0, 10**12), ("limit", limit, 1, 10**7))
        for name, value, lo, hi in checks:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise PolicyError(f"netem {name}={value!r} is outside {lo}..{hi}", kind="PolicyError")
        root = tc.root_kind(dev)
        if not (delay or jitter or loss or rate):
            # As the original: delay 0 = no netem. Undo only what netem (or the fallback)
            # put there: another root qdisc (the testbed's htb bottleneck) is not ours.
            if root != "netem":
                fallback = tc.netem_fallback(self.netem_fallback)
                if fallback is None:
                    return NetemReply(dev, [])
                result = fallback(dev, 0, 0, 0, 0, limit)  # all zeros = the delay line's own setting
                self.journal.forget("netem_fallback", dev)
                return NetemReply(dev, fallback=self.netem_fallback, result=result)
            self._record_qdisc(dev)
            tc.run(["tc", "qdisc", "del", "dev", dev, "root"], "tc qdisc del")
            return NetemReply(dev, [["tc", "qdisc", "del", "dev", dev, "root"]])
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
        proc = tc.run(["tc", *argv], "set netem")
        if proc.returncode == 0:
            return NetemReply(dev, [["tc", *argv]], warnings=warnings or None)
        if not had_entry:
            self.journal.forget("qdisc", dev)
        if "netem" not in root and re.search(r"unknown|not found|No such file|Error: Specified qdisc",
                                             proc.stderr, re.I):
            fallback = tc.netem_fallback(self.netem_fallback)
            if fallback is None:
                raise AgentError(f"netem is unavailable on this host (tc: {proc.stderr.strip()}); "
                                 "set NETESTO_NETEM_FALLBACK=module:function for a userspace delay line",
                                 kind="Unavailable", detail={"argv": ["tc", *argv]})
            # Restore calls the fallback with delay 0 for this entry.
            self.journal.record("netem_fallback", dev, self.netem_fallback)
            result = fallback(dev, delay, jitter, loss, rate, limit)
            return NetemReply(dev, fallback=self.netem_fallback, result=result)
        raise AgentError(f"set netem on {dev}: {proc.stderr.strip()}", kind="ControlError")

    # ---- tcpdump
    def tcpdump_start(self, exp_dir: Path, exp: str, dev: str, server: str, packets: int) -> TcpdumpStartReply:
        return self.tcpdumps.start(exp_dir, exp, dev, server, packets)

    def tcpdumps_running(self, exp: str) -> list[int]:
        """PIDs of ``exp``'s tcpdumps still capturing (their pcaps still grow)."""
        return self.tcpdumps.running(exp)

    def tcpdump_stop(self, exp: str | None = None) -> TcpdumpStopReply:
        return self.tcpdumps.stop(exp)

    # ---- restore
    def restore(self) -> RestoreReply:
        """Undo every journaled change (newest state back to the first original)."""
        restored: list[str] = []
        errors: list[str] = []
        for dev, spec in list(self.journal.data["netem_fallback"].items()):
            try:
                fallback = tc.netem_fallback(self.netem_fallback)
                if fallback is not None:
                    fallback(dev, 0, 0, 0, 0, 1000)  # delay 0 removes the delay line
                restored.append(f"netem fallback on {dev}")
            except Exception as exc:
                errors.append(f"netem fallback on {dev}: {exc}")
            self.journal.forget("netem_fallback", dev)
        for dev, original in list(self.journal.data["qdisc"].items()):
            try:
                proc = tc.run(["tc", "qdisc", "del", "dev", dev, "root"], "restore qdisc")
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
                why = unrebuildable(original)
                if not why:
                    try:
                        why = tc.rebuild_qdisc(dev, original)
                    except (AgentError, ValueError, TypeError, KeyError, AttributeError) as exc:
                        # tc refused, or the record is damaged: the default is the safe state.
                        why = exc.message if isinstance(exc, AgentError) else f"its record is damaged ({exc!r})"
                        tc.run(["tc", "qdisc", "del", "dev", dev, "root"], "restore qdisc")
                if why:
                    # Never silent: the host is not as it was, and someone has to put it back by hand.
                    errors.append(f"qdisc on {dev}: NOT restored exactly: it was '{original.get('show')}'"
                                  f"{tree_text(original)}; {why}; {dev} now has "
                                  f"'{tc.qdisc_show(dev)}'")
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
        return RestoreReply(restored, errors)


__all__ = ["HostControl", "PROC_SYS", "normalize_settings", "parse_sysctl_values", "sysctl_path"]
