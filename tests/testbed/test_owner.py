"""`netesto testbed down` without --name takes only a testbed of its own owner: on a shared
machine "the only one up" was another user's.

Owners are real: another user (a process of another uid: a user namespace of its own, where
it is the overflow uid, nobody; /root's python is not reachable by a setuid one), a user through sudo
(SUDO_UID, as sudo sets it) and two root login sessions (a login uid written to
/proc/self/loginuid, as pam_loginuid does at login: the kernel gives each its own
session id). Loopback testbeds in a state directory of the test's own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from . import tbutil

NOBODY = 65534


def _login_as_root() -> None:
    with open("/proc/self/loginuid", "w") as fh:  # a new login: the kernel assigns a new session id
        fh.write("0")


def _can_log_in() -> bool:
    try:
        probe = subprocess.run(["cat", "/proc/self/sessionid"], preexec_fn=_login_as_root, capture_output=True,
                               text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0 and probe.stdout.strip() not in ("", "4294967295")


class Netesto:
    """``netesto testbed ...`` in subprocesses sharing one state directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.state = tmp / "state"
        self.state.mkdir(mode=0o777)
        self.state.chmod(0o777)  # another uid shares it, as users share /run/netesto/testbeds
        self.env = {**os.environ, "NETESTO_STATE_DIR": str(self.state)}
        self.env.pop("SUDO_UID", None)

    def __call__(self, *args: str, env: dict[str, str] | None = None, preexec: Callable[[], None] | None = None,
                 prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, sys.executable, "-m", "netesto", "testbed", *args], capture_output=True, text=True,
                              timeout=60, env={**self.env, **(env or {})}, preexec_fn=preexec, cwd=self.tmp)

    def up(self, name: str, env: dict[str, str] | None = None, preexec: Callable[[], None] | None = None,
           prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        files = self.tmp / name
        files.mkdir(mode=0o777)
        files.chmod(0o777)
        done = self("up", "--loopback", "--hosts", "1", "--name", name, "--dir", str(files), env=env, preexec=preexec,
                    prefix=prefix)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def alive(self, name: str) -> bool:
        return (self.state / f"{name}.json").exists()


@pytest.fixture
def netesto(tmp_path: Path):
    tb = Netesto(tmp_path)
    yield tb
    for state in tb.state.glob("*.json"):  # what a failed test left: down by name, whoever owns it
        tb("down", "--name", state.stem)
    assert list(tb.state.glob("*.json")) == []


def _other_uid_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", sys.executable, "-c", "import os; print(os.geteuid())"],
                           capture_output=True, text=True, timeout=30)
    return probe.returncode == 0 and probe.stdout.strip() == str(NOBODY)


@pytest.mark.skipif(not _other_uid_ok(), reason="unshare --user is not available")
def test_down_without_a_name_leaves_another_users_testbed(netesto: Netesto) -> None:
    theirs = tbutil.unique_name()
    netesto.up(theirs, prefix=("unshare", "--user"))
    refused = netesto("down")
    assert refused.returncode == 1 and netesto.alive(theirs), refused.stdout
    assert f"testbeds of other owners are up: {theirs} of nobody (uid {NOBODY}); none is yours" in refused.stderr
    status = netesto("status", "--name", theirs)
    assert f"owner nobody (uid {NOBODY})" in status.stdout, status.stdout
    # with a name it does what it did: root takes it down
    done = netesto("down", "--name", theirs)
    assert done.returncode == 0 and f"testbed {theirs}: down" in done.stdout and not netesto.alive(theirs)


def test_down_without_a_name_takes_the_only_one_when_it_is_ones_own(netesto: Netesto) -> None:
    mine = tbutil.unique_name()
    netesto.up(mine)
    done = netesto("down")
    assert done.returncode == 0 and f"testbed {mine}: down" in done.stdout and not netesto.alive(mine), done.stderr


def test_a_user_through_sudo_is_another_owner_than_root(netesto: Netesto) -> None:
    theirs, mine = tbutil.unique_name(), tbutil.unique_name()
    netesto.up(theirs, env={"SUDO_UID": "0"})  # root's own sudo: an owner apart from plain root's
    netesto.up(mine)
    refused = netesto("down")
    assert refused.returncode == 1 and netesto.alive(theirs) and netesto.alive(mine)
    assert f"{theirs} of root (through sudo); yours: {mine}" in refused.stderr, refused.stderr
    assert netesto("down", env={"SUDO_UID": "0"}).returncode == 1  # its owner too sees one that is not its own
    assert netesto("down", "--name", mine).returncode == 0 and not netesto.alive(mine)
    done = netesto("down", env={"SUDO_UID": "0"})  # now the only one up is its own
    assert done.returncode == 0 and not netesto.alive(theirs), done.stderr


@pytest.mark.skipif(not _can_log_in(), reason="cannot set a login uid here (no audit support)")
def test_two_root_login_sessions_are_two_owners(netesto: Netesto, tmp_path: Path) -> None:
    # One root session brings a testbed up and later takes it down, in a shell that stays its
    # session; a second root session in between may not take it without its name.
    name = tbutil.unique_name()
    files = tmp_path / name
    files.mkdir()
    marker, proceed = tmp_path / "up", tmp_path / "go"
    script = (f"{sys.executable} -m netesto testbed up --loopback --hosts 1 --name {name} --dir {files} >/dev/null"
              f" && touch {marker} && while [ ! -e {proceed} ]; do sleep 0.1; done"
              f" && {sys.executable} -m netesto testbed down")
    first = subprocess.Popen(["sh", "-c", script], env=netesto.env, preexec_fn=_login_as_root,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        refused = netesto("down", preexec=_login_as_root)
        assert refused.returncode == 1 and netesto.alive(name), refused.stderr
        assert f"{name} of root (login uid 0, session " in refused.stderr and "none is yours" in refused.stderr
        proceed.touch()
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0 and f"testbed {name}: down" in out, out + err
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
