"""Testbed state files: what `up` created, so `down` removes exactly that.

A testbed's state is a JSON file ``<state dir>/<name>.json`` written as each
resource is created (so a failed or killed ``up`` can still be undone). The
state dir is machine-wide (namespaces are), ``/run/netesto/testbeds`` for
root, else ``$XDG_RUNTIME_DIR/netesto/testbeds`` or ``/tmp/netesto-<uid>``;
``NETESTO_STATE_DIR`` overrides it.

Processes are recorded with their kernel start time, so a recycled PID is
never signalled by mistake. Each state records its owner (:func:`current_owner`),
so that ``netesto testbed down`` without a name never takes another user's testbed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Iterator

from netesto import proctable
from netesto.errors import TestbedError


def state_dir() -> Path:
    """The machine-wide directory holding testbed state files."""
    env = os.environ.get("NETESTO_STATE_DIR")
    if env:
        path = Path(env)
    elif os.geteuid() == 0:
        path = Path("/run/netesto/testbeds")
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "netesto" / "testbeds"
    else:
        path = Path(f"/tmp/netesto-{os.geteuid()}") / "testbeds"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_path(name: str) -> Path:
    return state_dir() / f"{name}.json"


def load_state(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise TestbedError(f"no testbed state at {path} (is the testbed up?)") from exc
    except ValueError as exc:
        raise TestbedError(f"testbed state {path} is not valid JSON: {exc}") from exc
    return data


UNSET_ID = 4294967295  # (uid_t)-1 in /proc/self/loginuid and sessionid: no login recorded


def _login_id(name: str) -> int | None:
    """/proc/self/loginuid or sessionid: set by pam_loginuid at login and kept across sudo and su
    (None where nothing logged in: a service, a container without pam_loginuid)."""
    try:
        value = int(Path(f"/proc/self/{name}").read_text())
    except (OSError, ValueError):
        return None
    return None if value == UNSET_ID else value


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def current_owner() -> dict[str, Any]:
    """Who is making a testbed: the user who logged in (the login uid the kernel keeps across
    sudo and su), and for a login as root, which login session; without a login uid, sudo's
    SUDO_UID, else the effective uid."""
    uid, login = os.geteuid(), _login_id("loginuid")
    sudo = os.environ.get("SUDO_UID", "")
    owner: dict[str, Any] = {"uid": uid, "login_uid": login, "session": _login_id("sessionid") if login == 0 else None,
                             "sudo_uid": int(sudo) if sudo.isdigit() else None}
    if login is not None:
        key = f"login {login}" + (f" session {owner['session']}" if login == 0 else "")
        who = f"{_user(login)} (login uid {login}" + (f", session {owner['session']})" if login == 0 else ")")
    elif owner["sudo_uid"] is not None:
        key, who = f"sudo {owner['sudo_uid']}", f"{_user(owner['sudo_uid'])} (through sudo)"
    else:  # no login uid: every session of this uid is one owner
        key, who = f"uid {uid}", f"{_user(uid)} (uid {uid})"
    owner.update(key=key, who=who)
    return owner


def owned_by_me(state: dict[str, Any]) -> bool:
    """Whether ``state`` was made by :func:`current_owner` (a state without an owner: no)."""
    owner = state.get("owner")
    return isinstance(owner, dict) and owner.get("key") == current_owner()["key"]


def owner_text(state: dict[str, Any]) -> str:
    owner = state.get("owner")
    return str(owner.get("who", owner.get("key"))) if isinstance(owner, dict) else "an unknown owner (no owner recorded)"


def save_state(path: Path, state: dict[str, Any]) -> None:
    # A testbed's first save records who made it; later saves (a reshape by anyone) keep that.
    if not path.exists():
        state.setdefault("owner", current_owner())
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    tmp.replace(path)


def list_states() -> list[dict[str, Any]]:
    out = []
    for path in sorted(state_dir().glob("*.json")):
        if path.name.startswith("_"):
            continue
        try:
            out.append(load_state(path))
        except TestbedError:
            continue
    return out


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Serialise testbed set-up/tear-down steps that touch global settings."""
    with open(state_dir() / "_lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def proc_start_time(pid: int) -> int | None:
    """The kernel start time (clock ticks since boot) of ``pid``, None if gone."""
    st = proctable.stat(pid)
    return None if st is None else st.start


def proc_alive(pid: int, start_time: int | None) -> bool:
    """``pid`` runs (not a zombie) and, given ``start_time``, is still the process that started then."""
    st = proctable.stat(pid)
    return st is not None and st.state != "Z" and (start_time is None or st.start == start_time)


def stop_process(pid: int, start_time: int | None, *, grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; only if it is still that process."""
    if not proc_alive(pid, start_time):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not proc_alive(pid, start_time):
            return
        time.sleep(0.02)
    if proc_alive(pid, start_time):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            _reap(pid)
            if not proc_alive(pid, start_time):
                return
            time.sleep(0.02)


def _reap(pid: int) -> None:
    # Our own children would stay zombies (and "alive" to kill(0)) until waited for.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)



def remove_lab_files(state: dict[str, Any]) -> None:
    """A testbed that is down takes its lab file and CURVE keys with it: a run against a stale
    lab file waited out a timeout per host before failing. The agents' data directory stays."""
    lab = state.get("lab")
    if not lab:
        return
    lab_path = Path(lab)
    lab_path.unlink(missing_ok=True)
    keys = lab_path.parent / f"{state.get('name', '')}.keys"
    if state.get("name") and keys.is_dir() and not keys.is_symlink():
        shutil.rmtree(keys, ignore_errors=True)

__all__ = [
    "current_owner",
    "list_states",
    "load_state",
    "machine_lock",
    "owned_by_me",
    "owner_text",
    "proc_alive",
    "proc_start_time",
    "remove_lab_files",
    "save_state",
    "state_dir",
    "state_path",
    "stop_process",
]
