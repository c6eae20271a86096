"""A worker's Jupyter kernel, kept warm from point to point, and the papermill engine that runs points in it.

A fresh kernel per point paid its start (0.8 s) and the imports of netesto,
xarray, holoviews and bokeh (3-5 s) again at every point. :class:`WarmKernel`
keeps one kernel per worker (lab) instead: before each point its user namespace
is reset (``%reset``: variables, ``In``/``Out``, execution count 1), its working
directory moved to the point's directory and its notebook plots made to carry BokehJS
anew (:func:`netesto.plots.inline.forget`: each point's notebook stands alone); what
stays is what a reset keeps, the imported modules (and what its runs taught the
estimates). A point that did not end ok (an error, a timeout, a dead kernel)
ends its kernel: its ``atexit`` handlers (the shipped notebook takes its own
testbed down in one) run there and then, and the next point gets a new kernel.
``fresh=True`` (``--fresh-kernels``) starts a kernel per point as before.

:class:`PointEngine` is papermill's nbclient engine with two additions: the
notebook runs in the given kernel manager (left running afterwards, its client's
channels closed), and every line the kernel prints (the point's run progress)
is handed to ``on_line`` as it arrives.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from queue import Empty
from typing import Any, Callable

from nbclient.util import ensure_async, run_hook, run_sync
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines

ENGINE = "netesto-point"
LineSink = Callable[[str], None]

# Run in the kept kernel before a point: nothing of the last point's namespace, its directory, and
# its first plot carrying BokehJS again (each point's notebook is saved and exported on its own).
_PREPARE = ("get_ipython().reset(new_session=True, aggressive=False)\n"
            "__import__('os').chdir({path!r})\n"
            "__import__('netesto.plots.inline', fromlist=['forget']).forget()\n")


async def _answer(channel: Any, msg_id: str, wait: float) -> dict[str, Any] | None:
    """The message answering ``msg_id`` on ``channel`` within ``wait`` seconds, or None (others are dropped)."""
    end = time.monotonic() + wait
    while (left := end - time.monotonic()) > 0:
        try:
            msg: dict[str, Any] = await ensure_async(channel.get_msg(timeout=left))
        except Empty:
            return None
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            return msg
    return None


async def channels_ready(kc: Any, timeout: float) -> None:
    """``kc``'s kernel answers a kernel_info on shell, and its status for it comes on iopub: both channels
    are connected. (jupyter_client's wait_for_ready then waits out 0.2 s of iopub silence too, every
    point; nbclient tells a cell's outputs from others by the request they answer anyway.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg_id = kc.kernel_info()
        if await _answer(kc.shell_channel, msg_id, 1.0) and await _answer(kc.iopub_channel, msg_id, 0.5):
            return
        if not await ensure_async(kc.is_alive()):
            raise RuntimeError("the kernel died before it answered kernel_info")
    raise RuntimeError(f"the kernel did not answer kernel_info on both channels in {timeout:g} s")


class _PointClient(PapermillNotebookClient):  # type: ignore[misc]
    """papermill's client, with each stream text of the kernel passed on line by line, and its channels
    checked by :func:`channels_ready`."""

    on_line: LineSink | None = None
    _partial = ""

    async def async_start_new_kernel_client(self) -> Any:
        """nbclient's, with :func:`channels_ready` for its wait_for_ready."""
        assert self.km is not None
        try:
            self.kc = self.km.client()
            await ensure_async(self.kc.start_channels())
            await channels_ready(self.kc, self.startup_timeout)
        except Exception:
            await self._async_cleanup_kernel()
            raise
        self.kc.allow_stdin = False
        await run_hook(self.on_notebook_start, notebook=self.nb)
        return self.kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def output(self, outs: Any, msg: dict[str, Any], display_id: Any, cell_index: int) -> Any:
        if self.on_line is not None and msg.get("msg_type") == "stream":
            text = self._partial + str(msg["content"].get("text", ""))
            *lines, self._partial = text.replace("\r", "\n").split("\n")
            for line in lines:
                if line.strip():
                    with contextlib.suppress(Exception):  # the display must not fail the point
                        self.on_line(line.rstrip())
        return super().output(outs, msg, display_id, cell_index)


class PointEngine(NBClientEngine):  # type: ignore[misc]
    """papermill's nbclient engine, running in a kept kernel and forwarding the kernel's lines."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                 stdout_file: Any = None, stderr_file: Any = None, start_timeout: float = 60,
                                 execution_timeout: float | None = None, on_line: LineSink | None = None,
                                 **kwargs: Any) -> Any:
        kwargs.pop("input_path", None)
        for name in ("timeout", "startup_timeout"):
            kwargs.pop(name, None)
        client = _PointClient(nb_man, timeout=execution_timeout, startup_timeout=start_timeout,
                              kernel_name=kernel_name, log=_logger(), log_output=log_output,
                              stdout_file=stdout_file, stderr_file=stderr_file, **kwargs)
        client.on_line = on_line
        try:
            return client.execute()
        finally:
            if not client.owns_km and client.kc is not None:
                client.kc.stop_channels()  # the kernel stays; this point's channels to it do not
                client.kc = None


def _logger() -> Any:
    from papermill.log import logger

    return logger


papermill_engines.register(ENGINE, PointEngine)


class WarmKernel:
    """One worker's kernel (see the module)."""

    def __init__(self, kernel_name: str, extra_arguments: list[str], *, fresh: bool = False) -> None:
        self.kernel_name = kernel_name
        self.extra_arguments = list(extra_arguments)
        self.fresh = fresh
        self.km: Any = None
        self.points = 0  # points run in the current kernel

    def manager(self, directory: Path) -> Any:
        """The kernel manager the next point runs in: the kept kernel, reset and moved to ``directory``,
        or a new one (nbclient starts it in ``directory``); None with ``fresh``."""
        if self.fresh:
            return None
        if self.km is not None and not self._ready(directory):
            self.end()
        if self.km is None:
            from jupyter_client.manager import AsyncKernelManager

            self.km = AsyncKernelManager(kernel_name=self.kernel_name)
            self.points = 0
        self.points += 1
        return self.km

    def _ready(self, directory: Path) -> bool:
        """The kept kernel, alive, reset and in ``directory`` (False: it is not usable)."""
        from jupyter_core.utils import run_sync

        try:
            if not self.km.has_kernel or not run_sync(self.km.is_alive)():
                return False
            kc = self.km.blocking_client()
            # The shell channel only: its reply says the reset ran (papermill's client checks both channels
            # before the first cell, :func:`channels_ready`).
            kc.start_channels(iopub=False, stdin=False, hb=False, control=False)
            try:
                msg_id = kc.execute(_PREPARE.format(path=str(directory)), silent=True, store_history=False)
                reply = run_sync(_answer)(kc.shell_channel, msg_id, 30.0)
            finally:
                kc.stop_channels()
        except Exception:  # noqa: BLE001 - a kernel that does not answer is replaced, not a failed point
            return False
        return reply is not None and reply["content"].get("status") == "ok"

    def end(self) -> None:
        """End the kept kernel (its atexit handlers run); the next point starts a new one."""
        km, self.km = self.km, None
        if km is None:
            return
        from jupyter_core.utils import run_sync

        with contextlib.suppress(Exception):
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=False)
        with contextlib.suppress(Exception):
            run_sync(km.cleanup_resources)()


__all__ = ["ENGINE", "PointEngine", "WarmKernel"]
