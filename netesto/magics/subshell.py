"""A widget whose clicks are handled while the kernel's main thread is busy: a kernel subshell of its own.

A background run's Stop button is a widget: its clicks come to the kernel as comm messages
on the shell channel, and a kernel handles those between cells, on its main thread. With
another cell running (a 20 s analysis) the stop landed 20 s late. ipykernel 7 has subshells
(JEP 91): threads of their own that run shell messages beside the main one, and it sends a
comm's messages to the subshell that comm last spoke from. :func:`answer_beside` creates a
subshell (asking the kernel's control channel for one, as a front end would) and makes the
widget's comm speak from it, so its clicks run there at once, whatever the main thread does.
With an older kernel, or outside one, the widget stays as it is: its clicks wait their turn.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)
_SUBSHELL: list[str] = []  # this kernel's subshell for widgets that must answer at once (made once)


def _create_subshell(kernel: Any) -> str | None:
    """A new subshell of ``kernel`` (this process's), asked for on its control channel; None if it has none."""
    if getattr(kernel, "shell_channel_thread", None) is None:
        return None  # ipykernel < 7, or subshells off
    from ipykernel.connect import get_connection_file
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=get_connection_file())
    client.load_connection_file()
    client.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
    try:
        request = client.session.msg("create_subshell_request", {})
        client.control_channel.send(request)
        while True:  # the kernel's control thread answers, beside a busy main thread
            reply = client.control_channel.get_msg(timeout=5)
            if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
                break
        content = reply["content"]
        return str(content["subshell_id"]) if content.get("status") == "ok" else None
    finally:
        client.stop_channels()


def answer_beside(widget: Any) -> bool:
    """Have ``widget``'s messages from the front end (a button's clicks) handled in a subshell, beside
    the main thread: True if they will be."""
    try:
        from ipykernel.kernelbase import Kernel

        if not Kernel.initialized():
            return False
        if not _SUBSHELL:
            made = _create_subshell(Kernel.instance())
            if made is None:
                return False
            _SUBSHELL.append(made)
        comm = getattr(widget, "comm", None)
        if comm is None or not hasattr(comm, "_reply_subshell_for"):
            return False
        comm._reply_subshell_id = _SUBSHELL[0]  # where ipykernel sends the comm's next messages
        return True
    except Exception as exc:  # a kernel without subshells, a control channel that does not answer: as before
        log.debug("no subshell for a widget: %s", exc)
        return False


__all__ = ["answer_beside"]
