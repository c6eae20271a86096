"""The restore journal: what the agent changed on this host and the originals to put back.

Every change is recorded (original value first) in a JSON file before it is
made, so a restore can undo it even after the agent was restarted. A qdisc
entry is the original root's record; :func:`unrebuildable` says whether
restore can recreate it exactly.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger("netesto.agent.control")


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


def unrebuildable(entry: Mapping[str, Any]) -> str:
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


def rebuild_args(entry: Mapping[str, Any]) -> list[str]:
    """tc arguments after the kind that recreate the recorded options of a bfifo, pfifo, pfifo_fast or noqueue."""
    opts = entry["options"]
    if entry["kind"] in ("bfifo", "pfifo") and "limit" in opts:
        return ["limit", str(int(opts["limit"]))]
    return []  # pfifo_fast and noqueue take no options; the read-back checks the defaults match



def tree_text(entry: Mapping[str, Any]) -> str:
    """The classes and filters of a recorded tree, for a restore error ("" if none)."""
    parts = [f"{what}es '{entry[what]}'" if what == "class" else f"{what}s '{entry[what]}'"
             for what in ("class", "filter") if entry.get(what)]
    return f" with {' and '.join(parts)}" if parts else ""



__all__ = ["Journal", "REBUILD", "rebuild_args", "tree_text", "unrebuildable"]
