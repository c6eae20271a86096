"""Live progress of a run in a notebook: an ipywidgets bar, action line and log, and the static
snapshot that takes their place when the run is over (widgets are dead once the kernel is gone:
a saved notebook reopened, or exported, would show "model not found" or ``VBox(children=...``)."""

from __future__ import annotations

import html
import threading
import time
from typing import Any, Callable

from netesto.controller.progress import (
    ActionStarted,
    DataStored,
    EchoText,
    ExperimentProcessed,
    ExperimentStarted,
    FlowProgress,
    HostError,
    Notice,
    Progress,
    RunFinished,
)


class WidgetProgress(Progress):
    """Shows a run as a progress bar over the planned wall time plus a short log.

    ``estimate`` is the plan's estimated seconds (the bar's length); events may
    come from agent-client threads, so updates hold a lock.
    """

    def __init__(self, estimate: float) -> None:
        import ipywidgets as w

        self._t0 = time.time()
        self._estimate = max(estimate, 1.0)
        self._lock = threading.Lock()
        self._lines: list[tuple[str, str]] = []  # (text, colour)
        self.display: Any = None  # the DisplayHandle the view was shown with: freeze() updates it
        self.bar = w.FloatProgress(value=0.0, min=0.0, max=self._estimate, description="netesto",
                                   layout=w.Layout(width="60%"))
        self.status = w.Label(value="starting")
        self.log = w.HTML(value="")
        self.box = w.VBox([w.HBox([self.bar, self.status]), self.log])
        self._flows_live = 0
        self._finished = False
        self.stop_button: Any = None

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.box)

    def _tick(self, text: str | None = None) -> None:
        elapsed = time.time() - self._t0
        self.bar.value = min(elapsed, self._estimate)
        if text is not None:  # past the estimate the bar stays full and says so, not "14.5/7 s"
            of = f"/{self._estimate:.0f} s" if elapsed <= self._estimate else f" s of an estimated {self._estimate:.0f}"
            self.status.value = f"{elapsed:5.1f}{of}  {text}"

    def _log(self, text: str, colour: str = "") -> None:
        self._lines.append((text, colour))
        self.log.value = _lines_html(self._lines[-12:])

    def handle(self, event: Any) -> None:
        with self._lock:
            super().handle(event)

    def on_experiment_started(self, e: ExperimentStarted) -> None:
        self._log(f"experiment {e.exp} {e.exp_name}")

    def on_action_started(self, e: ActionStarted) -> None:
        host = f" {e.host}" if e.host else ""
        self._tick(f"{e.kind}{host}")

    def on_flow_progress(self, e: FlowProgress) -> None:
        if e.event == "started":
            self._flows_live += 1
        elif e.event in ("done", "error"):
            self._flows_live = max(0, self._flows_live - 1)
        if e.event == "error":
            self._log(f"flow {e.flow} on {e.host}: {e.data.get('error', 'error')}", "crimson")
        self._tick(f"{self._flows_live} flow(s) running")

    def on_host_error(self, e: HostError) -> None:
        self._log(f"{e.host}: {e.error}", "crimson")

    def on_notice(self, e: Notice) -> None:
        self._log(f"note: {e.text}", "gray")

    def on_data_stored(self, e: DataStored) -> None:
        self._log(f"stored {e.files} file(s) from {e.host}")

    def on_echo_text(self, e: EchoText) -> None:
        self._log(e.text)

    def on_experiment_processed(self, e: ExperimentProcessed) -> None:
        note = f" ({e.note})" if e.note else ""
        self._log(f"experiment {e.exp} processed{note}")

    def on_run_finished(self, e: RunFinished) -> None:
        self._finished = True
        self._end_stop_button("stopped" if e.interrupted else "finished")
        self.bar.max = max(self.bar.max, e.elapsed)
        self.bar.value = self.bar.max
        exps = ", ".join(str(x) for x in e.experiments) or "none"
        if e.interrupted:
            self.bar.bar_style = "warning"
            self.status.value = f"interrupted after {e.elapsed:.1f} s: partial experiments {exps} kept"
        else:
            self.bar.bar_style = "danger" if e.errors else "success"
            self.status.value = f"done in {e.elapsed:.1f} s: experiments {exps}"

    def add_stop(self, stop: Callable[[], None]) -> None:
        """A Stop button calling ``stop()`` (a background run's), its clicks handled in a kernel subshell
        beside the main thread (:mod:`netesto.magics.subshell`): at once, even while another cell runs."""
        import ipywidgets as w

        from netesto.magics.subshell import answer_beside

        button = w.Button(description="Stop", button_style="warning", icon="stop", layout=w.Layout(width="8em"))

        def clicked(_: Any) -> None:
            button.disabled, button.description = True, "stopping"
            stop()

        button.on_click(clicked)
        answer_beside(button)
        self.stop_button = button
        top = self.box.children[0]
        top.children = (*top.children, button)

    def _end_stop_button(self, state: str) -> None:
        """The Stop button, once the run is over: disabled, saying how it ended (not "stopping" forever)."""
        if self.stop_button is not None:
            self.stop_button.disabled, self.stop_button.description = True, state
            self.stop_button.button_style = ""

    def snapshot_parts(self) -> tuple[str, str]:
        """HTML a subclass shows between the status line and the log (and its plain text)."""
        return "", ""

    def snapshot(self) -> "Snapshot":
        """The view as it ends, in static HTML: its status, what :meth:`snapshot_parts` adds, the whole log."""
        extra_html, extra_text = self.snapshot_parts()
        with self._lock:
            status, style, lines = self.status.value, self.bar.bar_style, list(self._lines)
        colour = {"success": "#2e7d32", "danger": "#c62828", "warning": "#ef6c00"}.get(style, "inherit")
        log = (f"<details{' open' if len(lines) <= 12 else ''}><summary>log ({len(lines)} lines)</summary>"
               f"{_lines_html(lines)}</details>") if lines else ""
        page = (f'<div class="netesto-run"><div><b>netesto</b> <span style="color:{colour}">{html.escape(status)}'
                f"</span></div>{extra_html}{log}</div>")
        text = "\n".join([f"netesto: {status}", *([extra_text] if extra_text else []), *(t for t, _ in lines)])
        return Snapshot(page, text)

    def freeze(self) -> None:
        """Put :meth:`snapshot` in the view's place in the notebook and close the view's widgets."""
        if self.display is None:
            return
        self.display.update(self.snapshot())
        self.display = None
        for widget in _widgets(self.box):
            widget.close()

    def close_run(self, text: str = "stopped") -> None:
        """End the view of a run that finished without saying so (an error before RunFinished)."""
        with self._lock:
            if not self._finished:
                self._end_stop_button(text)
                self._finished = True
                self.bar.bar_style = "danger"
                self.status.value = f"{text} after {time.time() - self._t0:.1f} s"


class Snapshot:
    """A finished run's view as notebook output: static HTML, and plain text for text exports."""

    def __init__(self, html_: str, text: str) -> None:
        self.html, self.text = html_, text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


def _lines_html(lines: list[tuple[str, str]]) -> str:
    """Log lines as HTML, each in its colour."""
    return "".join((f'<div style="color:{c}">' if c else "<div>") + f"{html.escape(t)}</div>" for t, c in lines)


def _widgets(root: Any) -> list[Any]:
    """``root`` and every widget inside it (a box's children, depth first), with their layouts and styles."""
    out = [root] + [part for part in (getattr(root, "layout", None), getattr(root, "style", None))
                    if hasattr(part, "close")]  # each a widget model of its own
    for child in getattr(root, "children", ()):
        out += _widgets(child)
    return out
