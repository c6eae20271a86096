"""The ``%netesto`` line magic and the ``%%netesto`` cell magic."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from netesto.errors import NetestoError, RunInterrupted
from netesto.magics.outcome import CellInterrupted, held_warnings, interrupted_line

if TYPE_CHECKING:
    from netesto.script import State

DEFAULT_WORKDIR = "netesto-results"
DEFAULT_RESULT = "netesto_result"
PROGRESS_MODES = ("auto", "live", "bar", "text")


def _parse(magic: Any, line: str) -> Any:
    """``parse_argstring``, with shlex's ValueError (an unclosed quote) as a UsageError."""
    try:
        return parse_argstring(magic, line)
    except ValueError as exc:
        raise UsageError(f"%netesto {line.strip()}: {exc}") from None


@magics_class
class NetestoMagics(Magics):
    """Run Netesto script cells on a lab; remembers the lab, the workdir and what the
    cells that ran defined (one script interpreter's state, cell after cell) per session."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.lab: Any = None
        self.lab_path: str = ""
        self.workdir = Path(DEFAULT_WORKDIR)
        # What the cells that ran so far defined; None: nothing yet (or %netesto reset).
        self.state: State | None = None

    @magic_arguments(name="netesto")
    @argument("what", choices=["lab", "workdir", "show", "reset"], help="what to set, show or reset")
    @argument("value", nargs="?", help="a lab file (lab) or a directory (workdir)")
    @line_magic("netesto")  # type: ignore[arg-type, unused-ignore]  # IPython 9 types its decorators as taking Never
    def netesto_line(self, line: str) -> Any:
        """Set the lab or working directory the ``%%netesto`` cells use.

        ``%netesto lab FILE`` (a lab file, e.g. from ``netesto testbed up``),
        ``%netesto workdir DIR``, ``%netesto show``; ``%netesto reset`` forgets the
        variables, macros and SOURCEd files earlier cells defined.
        """
        args = _parse(self.netesto_line, line)
        if args.what == "lab":
            if not args.value:
                raise UsageError("%netesto lab FILE: the lab file is missing")
            from netesto.controller import Lab

            try:
                self.lab = Lab.from_file(args.value)
            except NetestoError as exc:
                raise UsageError(exc.format_message()) from None
            self.lab_path = args.value
            print(f"netesto: lab {self.lab_path}: hosts {', '.join(self.lab.names)}")
        elif args.what == "reset":
            if args.value:
                raise UsageError(f"%netesto reset takes no argument, got {args.value!r}")
            self.state = None
            print("netesto: script state cleared (variables, macros and SOURCEd files of earlier cells)")
        elif args.what == "workdir":
            if not args.value:
                raise UsageError("%netesto workdir DIR: the directory is missing")
            self.workdir = Path(args.value)
            print(f"netesto: results go to {self.workdir}")
        else:
            lab = self.lab_path or "(none: use %netesto lab FILE)"
            print(f"netesto: lab {lab}; workdir {self.workdir}")
        return None

    @magic_arguments(name="%netesto")
    @argument("--lab", help="lab file for this cell (default: the one set with %%netesto lab)")
    @argument("--workdir", help=f"results directory (default: {DEFAULT_WORKDIR})")
    @argument("-D", dest="defines", action="append", metavar="VAR=VALUE", help="define a variable")
    @argument("--as", dest="result", default=None,
              help=f"variable that receives the result, shown after the cell (a table and the flows' "
                   f"plots); without --as the result goes to {DEFAULT_RESULT} and is not shown")
    @argument("--plan", action="store_true", help="only print the plan; contact no agent")
    @argument("--trace", choices=["client", "server", "both", "none"], default="",
              help="record tcp:tcp_probe (every ACK's cwnd, ssthresh, srtt, snd_nxt/snd_una) on these ends of "
                   "every DO_CLIENT without trace= (docs/traces.md)")
    @argument("--background", action="store_true",
              help="return at once: --as NAME gets a handle (NAME.wait() gives the result, NAME.stop() stops "
                   "the run); the view has a Stop button that works while the kernel is idle")
    @argument("--progress", choices=PROGRESS_MODES, default="auto",
              help="live: widgets with a per-flow goodput/cwnd plot; bar: widgets only; text: plain lines "
                   "(auto: live in a notebook front end, text under papermill/nbconvert or a terminal)")
    @cell_magic("netesto")  # type: ignore[arg-type, unused-ignore]  # (as above)
    def netesto_cell(self, line: str, cell: str) -> None:
        """Run the cell's Netesto script on the lab, with live progress.

        The result (experiments, each with ``.dataset``) is bound to
        ``netesto_result``, or to ``--as NAME`` and then shown (its rich repr). Script errors show as one
        message with file:line, not a traceback. Cells share one script state:
        what a cell that ran defined (SET, BEGIN...END, SOURCE) the next cells
        see, as if they were one script; ``%netesto reset`` clears it.
        """
        from netesto.script import parse_defines

        args = _parse(self.netesto_cell, line)
        show = args.result is not None
        args.result = args.result or DEFAULT_RESULT
        if not args.result.isidentifier():
            raise UsageError(f"--as {args.result}: not a Python variable name")
        try:
            defines = parse_defines(args.defines)
            if args.plan:
                self._show_plan(cell, args, defines)
                return None
            if args.background:
                handle = self._start_background(cell, args, defines)
                assert self.shell is not None
                self.shell.user_ns[args.result] = handle
                print(f"netesto: running in the background: `{args.result}.wait()` gives the result, "
                      f"`{args.result}.stop()` (or the Stop button) stops it")
                return None
            result = self._run(cell, args, defines)
        except KeyboardInterrupt:  # outside the run (planning, the view's set-up): nothing was started
            raise CellInterrupted(interrupted_line(RunInterrupted("interrupted"), args.result)) from None
        except RunInterrupted as exc:  # the run's own cleanup is done: the cell ends in one line
            if exc.result is not None:
                self.state = exc.result.state or self.state
                assert self.shell is not None
                self.shell.user_ns[args.result] = exc.result
            raise CellInterrupted(interrupted_line(exc, args.result), result=exc.result) from None
        except NetestoError as exc:
            from netesto.controller.result import RunResult

            message = exc.format_message()
            kept = exc.detail
            if isinstance(kept, RunResult) and kept.state is not None:
                self.state = kept.state  # what the cell defined before a host failed stays defined
            if isinstance(kept, RunResult) and self.shell is not None:
                # run() raises when a host failed; what it stored is still the user's.
                self.shell.user_ns[args.result] = kept
                exps = ", ".join(str(e) for e in kept.exps) or "none"
                message += f"\nwhat the run kept (experiments {exps}) is in `{args.result}`"
            raise UsageError(message) from None
        self.state = result.state
        assert self.shell is not None  # set by IPython when the magics are registered
        self.shell.user_ns[args.result] = result
        exps = ", ".join(str(e) for e in result.exps) or "none"
        print(f"netesto: experiments {exps} in {result.workdir}; result in `{args.result}`")
        for err in result.errors:
            print(f"netesto: error: {err}")
        if show:
            from IPython.display import display

            display(result)  # its _repr_html_: the experiments, each flow's numbers and plots
        return None

    def _lab(self, args: Any) -> Any:
        """The cell's Lab (``--lab`` or the session's), None when neither is set. A lab file is read
        again for every cell: a testbed reshaped since (a sweep's next point) has rewritten its shape."""
        from netesto.controller import Lab

        lab = args.lab or self.lab
        if isinstance(lab, Lab) and lab.path is not None:
            lab = lab.path
        if lab is not None and not isinstance(lab, Lab):
            lab = Lab.from_file(lab)
        return lab

    def _plan(self, cell: str, args: Any, defines: dict[str, str], lab: Any) -> Any:
        """The cell's :class:`~netesto.controller.plan.Plan`, the one the run executes: the
        workdir's counter (not written), the lab's host_suffix and the session's state
        (copied: planning defines nothing)."""
        from netesto.controller.plan import make_plan

        return make_plan(cell, name="<cell>", defines=defines, state=self.state, workdir=self._workdir(args),
                         host_suffix=lab.host_suffix if lab is not None else "")

    def _workdir(self, args: Any) -> Path:
        return Path(args.workdir) if args.workdir else self.workdir

    def _show_plan(self, cell: str, args: Any, defines: dict[str, str]) -> None:
        from netesto.commands.plan import format_action
        from netesto.controller.plan import check_actions

        lab = self._lab(args)
        plan = self._plan(cell, args, defines, lab)
        if lab is not None:  # what run() refuses before it starts: unknown hosts, clashing flows
            check_actions(plan.actions, lab)
        for action in plan.actions:
            print(format_action(action))
        print(f"{len(plan.actions)} actions, about {plan.estimate:.0f} s")

    def _progress(self, estimate: float, mode: str, flows: Sequence[str] = ()) -> Any:
        """The cell's progress sink, displayed: the live view, the bar, or plain lines."""
        from IPython.display import display

        if mode == "auto":
            mode = "live" if _widget_frontend(self.shell) else "text"
        if mode == "live":
            try:
                from netesto.magics.liveview import LiveWidgetProgress, load_bokehjs

                view: Any = LiveWidgetProgress(estimate, flows=flows)
            except ImportError:  # no jupyter_bokeh (or ipywidgets): the bar at least
                mode = "bar"
            else:
                load_bokehjs([view.plot.layout])  # once per kernel, before the view that needs it
        if mode == "bar":
            try:
                from netesto.magics.widgets import WidgetProgress

                view = WidgetProgress(estimate)
            except ImportError:
                mode = "text"
        if mode == "text":
            return text_progress(estimate)
        view.display = display(view.box, display_id=True)  # the snapshot replaces it when the run ends
        return view

    def _prepare(self, cell: str, args: Any, defines: dict[str, str]) -> tuple[Any, Any, Path, Any]:
        """(plan, lab, workdir, displayed progress sink) of a cell about to run."""
        from netesto.controller.plan import planned_flows

        # A bad lab file fails before the progress view shows; planning before the
        # lab check shows script errors even before a lab is chosen.
        lab = self._lab(args)
        plan = self._plan(cell, args, defines, lab)
        if lab is None:
            raise UsageError("no lab: use `%netesto lab FILE` or `%%netesto --lab FILE`")
        # the bar's length: the run's whole time (start lead, fetching, processing), not only the script's
        progress = self._progress(plan.run_estimate(), args.progress, planned_flows(plan.actions, lab))
        return plan, lab, self._workdir(args), progress

    def _run(self, cell: str, args: Any, defines: dict[str, str]) -> Any:
        from netesto.controller import run_plan

        plan, lab, workdir, progress = self._prepare(cell, args, defines)
        shown = True
        with held_warnings() as held:
            try:
                return run_plan(plan, lab, workdir, progress, trace=args.trace)
            except RunInterrupted:
                shown = False  # what the stopped flows' files lack is expected (and in <exp>/errors.txt)
                raise
            finally:
                if hasattr(progress, "close_run"):
                    _freeze(progress)
                if shown:
                    held.target.writelines(held.held)

    def _start_background(self, cell: str, args: Any, defines: dict[str, str]) -> Any:
        """The cell's run in a thread: its handle, with the view's Stop button wired to it."""
        from netesto.controller import run_plan
        from netesto.controller.background import BackgroundRun

        plan, lab, workdir, progress = self._prepare(cell, args, defines)
        handle = BackgroundRun(lambda cancel: run_plan(plan, lab, workdir, progress, cancel=cancel,
                                                       trace=args.trace))
        if hasattr(progress, "add_stop"):
            progress.add_stop(handle.stop)
        handle.live = getattr(progress, "live", None)  # its samples as holoviews data, while it runs

        def finished(done: BackgroundRun) -> None:
            kept = done.result
            if getattr(kept, "state", None) is not None:
                self.state = kept.state  # what the script defined, for the cells after it
            if hasattr(progress, "close_run"):
                _freeze(progress)

        handle.on_done(finished)
        return handle


def text_progress(estimate: float) -> Any:
    """Plain progress lines that also keep every sample as holoviews data (``.live``: a
    :class:`~netesto.plots.livedata.LiveData`), as the live view does."""
    from netesto.controller.live import LiveText
    from netesto.plots.livedata import LiveData

    text = LiveText(estimate=estimate)
    text.live = LiveData()
    text.on_samples = text.live.add
    return text


def _freeze(progress: Any) -> None:
    """End a widget view: not left "running" if its run ended without RunFinished, then replaced by its
    static snapshot (which reopens, and exports show). The run is over: a Ctrl-C landing here (a second
    one, as the cleanup ends) is let go rather than leaving the view half replaced."""
    import signal
    import threading

    held = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, lambda *_: None) if held else None
    try:
        progress.close_run()
        progress.freeze()
    finally:
        if held:
            signal.signal(signal.SIGINT, old)


def _widget_frontend(shell: Any) -> bool:
    """Whether a front end that shows widgets is likely: a kernel whose request allows input.

    nbclient (papermill, nbconvert) executes with ``allow_stdin`` off and keeps no live
    widget view; JupyterLab, Notebook and VS Code allow input. A terminal IPython has no kernel.
    """
    kernel = getattr(shell, "kernel", None)
    return kernel is not None and bool(getattr(kernel, "_allow_stdin", False))
