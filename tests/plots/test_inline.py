"""BokehJS once per kernel: the first notebook plot carries it, the others draw with it, in any order."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto.plots import inline

from .browser import fresh_page, has_colour, in_chromium, painted, show


def _curve(label: str):
    import holoviews as hv

    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    return hv.Curve([(0, 1.0), (1, 3.0), (2, 2.0)], "time", "goodput", label=label).opts(title=label, width=900, height=250)


def _page(tmp_path: Path, *outputs: str) -> Path:
    page = tmp_path / "outputs.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                    + "".join(f"<div class='output'>{o}</div>" for o in outputs) + "</body></html>")
    return page


def test_each_library_is_carried_once_until_forgotten() -> None:
    first, second = inline.output(_curve("one")), inline.output(_curve("two"))
    assert first.count("BEGIN bokeh.min.js") == 1 and "Bokeh.set_log_level" in first
    assert "BEGIN bokeh.min.js" not in second and "Bokeh.set_log_level" not in second
    assert len(second) < len(first) / 20  # the plot's document only
    inline.forget()
    assert "BEGIN bokeh.min.js" in inline.output(_curve("three"))


def test_plots_draw_with_the_bokehjs_of_an_output_above_or_below(tmp_path: Path) -> None:
    carrier, ref = inline.output(_curve("carrier")), inline.output(_curve("after"))
    # after a kernel restart an output kept from before may sit above the output now carrying BokehJS
    shown = show(_page(tmp_path, ref, carrier, inline.output(_curve("below"))), tmp_path / "o.png")
    assert shown.errors == []
    assert sorted(f["title"] for f in shown.figures) == ["after", "below", "carrier"]
    # each line drawn in holoviews' first colour, its axes and labels around it
    assert all(f["renderers"] for f in shown.figures) and has_colour(shown.png, (48, 162, 218)) and painted(shown.png) > 0.01


def test_a_plot_whose_bokehjs_is_gone_says_so_in_its_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline, "WAIT_SECONDS", 1.0)
    inline.output(_curve("cleared"))  # the carrying output, then cleared from the notebook
    page = _page(tmp_path, inline.output(_curve("orphan")))

    def read(browser):
        with fresh_page(browser) as pg:
            pg.goto(page.as_uri())
            pg.wait_for_timeout(2500)
            return pg.evaluate("() => document.body.innerText")

    text = in_chromium(read)
    assert "This plot needs BokehJS" in text and "netesto.plots.inline.forget()" in text
