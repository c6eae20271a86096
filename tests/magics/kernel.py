"""A real IPython kernel running this interpreter (so this checkout's netesto), over jupyter_client."""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

KERNEL_NAME = "netesto-test"


def kernel_manager(where: Path) -> KernelManager:
    """A KernelManager for a kernel spec (written under ``where``) that runs ``sys.executable``:
    the installed ``python3`` spec may name another interpreter with another netesto."""
    spec = where / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": KERNEL_NAME, "language": "python",
    }))
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))


@dataclass
class Execution:
    """One execute request: its reply and every iopub message it caused, with arrival times
    (seconds after the request went out)."""

    reply: dict[str, Any]
    messages: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    interrupted_at: float | None = None
    interrupted_again: bool = False

    @property
    def status(self) -> str:
        return str(self.reply.get("status"))

    def of(self, msg_type: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, c) for t, kind, c in self.messages if kind == msg_type]

    def stream(self, name: str) -> str:
        return "".join(c["text"] for _, c in self.of("stream") if c["name"] == name)

    def widget_states(self) -> list[tuple[float, dict[str, Any]]]:
        """The state updates sent to widget models (``comm_msg`` "update")."""
        return [(t, c["data"]["state"]) for t, c in self.of("comm_msg") if c["data"].get("method") == "update"]


class Kernel:
    """Starts a kernel in ``cwd``; :meth:`execute` runs code, optionally interrupting it."""

    def __init__(self, where: Path, cwd: Path | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.km = kernel_manager(where)
        self.km.start_kernel(cwd=str(cwd or where), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def execute(self, code: str, *, interrupt_after: float | None = None,
                interrupt_when: Callable[[str, dict[str, Any]], bool] | None = None, timeout: float = 120,
                allow_stdin: bool = True, again_after: float | None = None) -> Execution:
        """Run ``code``; interrupt the kernel ``interrupt_after`` seconds after the request, or
        that long after the first iopub message ``interrupt_when(msg_type, content)`` is true for;
        once more ``again_after`` seconds later (an impatient user)."""
        msg_id = self.kc.execute(code, allow_stdin=allow_stdin)
        t0 = time.monotonic()
        ex = Execution(reply={})
        armed = 0.0 if interrupt_when is None else None
        while True:
            now = time.monotonic() - t0
            if now > timeout:
                raise TimeoutError(f"no idle status {timeout} s after executing {code[:60]!r}")
            if (interrupt_after is not None and armed is not None and ex.interrupted_at is None
                    and now >= armed + interrupt_after):
                self.km.interrupt_kernel()
                ex.interrupted_at = now
            if (again_after is not None and ex.interrupted_at is not None and not ex.interrupted_again
                    and now >= ex.interrupted_at + again_after):
                self.km.interrupt_kernel()
                ex.interrupted_again = True
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            ex.messages.append((time.monotonic() - t0, msg["msg_type"], msg["content"]))
            if armed is None and interrupt_when is not None and interrupt_when(msg["msg_type"], msg["content"]):
                armed = time.monotonic() - t0
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        while True:  # wait_for_ready may have left kernel_info replies before ours
            reply = self.kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                ex.reply = reply["content"]
                return ex

    def value(self, expr: str) -> Any:
        """``expr`` evaluated in the kernel, brought back as JSON."""
        ex = self.execute(f"import json as _j; print(_j.dumps({expr}, default=str))")
        assert ex.status == "ok", ex.reply
        return json.loads(ex.stream("stdout"))

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def click(kernel: Kernel, comm_id: str) -> None:
    """What a browser sends when a Button widget is clicked: a comm message on the shell channel."""
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom",
                                                                          "content": {"event": "click"}}})
    kernel.kc.shell_channel.send(msg)
