"""Shared fixtures: namespace pairs for real flows, skipped without root."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import leftovers  # noqa: E402
import netns  # noqa: E402

from netesto._importcost import defer_rfc3987_syntax  # noqa: E402

defer_rfc3987_syntax()  # the test modules that import nbformat: seconds off every worker's collection

_NETNS_OK: bool | None = None
_RUN_MARK = ""  # NAME=value in the environment of every process this pytest process starts (tests/leftovers.py)


def _netns_ok() -> bool:
    global _NETNS_OK
    if _NETNS_OK is None:
        _NETNS_OK = netns.netns_available()
    return _NETNS_OK


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as a terminal's foreground process has it, in this process and so in every process the tests
    start. Started as a background job of a non-interactive shell (``make test &``, a CI step's
    ``cmd &``), pytest and each xdist worker inherit SIGINT ignored, pass it on (SIG_IGN survives exec),
    and the tests that stop a run or a sweep with Ctrl-C see nothing stop it."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    import os

    global _RUN_MARK
    _RUN_MARK = f"{leftovers.MARK}={os.getpid()}"
    os.environ[leftovers.MARK] = str(os.getpid())  # this process's mark on every process its tests start


def pytest_sessionstart(session: pytest.Session) -> None:
    """Namespaces left by runs that died without their cleanup go first (their processes with them)."""
    if _netns_ok():
        stale = netns.remove_stale()
        if stale:
            print(f"\nremoved {len(stale)} namespaces of test runs that are gone: {' '.join(stale)}", file=sys.stderr)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="needs root and network namespaces")
    for item in items:
        if "netns" in item.keywords and not _netns_ok():
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    browser = sys.modules.get("tests.plots.browser")
    if browser is not None:  # the chromium the page tests shared (none started if none ran)
        browser.close_chromium()
    if _NETNS_OK:
        netns.cleanup_all()


@pytest.fixture(autouse=True)
def _signals_as_found() -> Iterator[None]:
    """SIGINT, SIGTERM and the signal mask as the test found them: one that left SIGINT ignored or
    blocked in this process passes that on to every process the later tests start (SIG_IGN and the mask
    survive exec), and their Ctrl-C tests see no Ctrl-C. What a test left is put back, with a warning
    naming it."""
    import signal
    import warnings

    nums = (signal.SIGINT, signal.SIGTERM)
    before = [signal.getsignal(n) for n in nums], signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    after = [signal.getsignal(n) for n in nums], signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if after != before:
        for n, handler in zip(nums, before[0]):
            signal.signal(n, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, before[1])
        warnings.warn(f"the test left the signals changed: {before} -> {after} (put back)", stacklevel=1)


@pytest.fixture(autouse=True)
def _no_process_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A process the test started that outlives its parent (an agent's engine server, once) fails the test, named
    with its signal state, and is killed: after the test's own teardown, this run's orphans started during the
    test get ``LEFTOVER_GRACE`` seconds to end."""
    import os

    path = str(tmp_path_factory.getbasetemp()) + os.sep
    since = leftovers.now()
    yield
    told = leftovers.stop_leftovers(since, _RUN_MARK, path, LEFTOVER_GRACE)
    if told:
        pytest.fail("processes outlived their parent (killed now):\n" + "\n".join(told), pytrace=False)


LEFTOVER_GRACE = 10.0  # seconds: an orphan stopping on its own (a server whose agent was killed) takes 1-3


@pytest.fixture(autouse=True)
def _as_a_fresh_process() -> None:
    """Each test starts as a fresh kernel does: its first notebook plot carries BokehJS (netesto.plots.inline),
    and its run estimates and start leads have learned nothing from earlier runs (netesto.controller.estimate,
    netesto.controller.startlead)."""
    from netesto.controller import startlead
    from netesto.controller.estimate import forget as unlearn
    from netesto.plots.inline import forget

    forget()
    unlearn()
    startlead.forget()


@pytest.fixture
def veth_pair():
    """Two fresh namespaces joined by a veth (``pair.a``/``pair.b``), removed after."""
    if not _netns_ok():
        pytest.skip("needs root and network namespaces")
    pair = netns.make_veth_pair()
    try:
        yield pair
    finally:
        pair.close()
