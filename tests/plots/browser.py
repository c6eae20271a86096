"""Open a saved page in Debian's chromium through Playwright: console errors, bokeh plots, pixels.

One chromium per test process (each xdist worker), started the first time a test asks and kept until
the session ends (:func:`close_chromium`, from conftest), each page in a fresh browser context of its
own (no cookies, storage or cache shared). Starting Playwright's driver and chromium took 1.3 s of CPU
each time, and some 40 tests open pages. All of it runs on one thread of its own: between two calls
Playwright's sync API leaves its event loop marked as running in the thread that made them, which
would break ``asyncio.run`` and every kernel client the test ran afterwards.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
_runner: ThreadPoolExecutor | None = None
_held: dict[str, Any] = {}  # "playwright", "browser": touched on the runner's thread only

# Every element naming a bokeh root (data-root-id) is a root of one of the page's bokeh documents.
# (A page whose BokehJS came twice, holoviews' extension loading its own after netesto's, has two Bokeh
# instances: window.Bokeh and window.Bokeh[version]; their documents are looked for in both.)
DOCUMENTS = """(window.Bokeh === undefined ? [] : [...new Set([window.Bokeh, ...Object.keys(window.Bokeh)
  .filter(k => /^[0-9]/.test(k)).map(k => window.Bokeh[k])])].flatMap(b => b && b.documents ? b.documents : []))"""
ALL_EMBEDDED = """() => { const roots = [...document.querySelectorAll('[data-root-id]')];
  if (roots.length === 0) return true;
  if (window.Bokeh === undefined) return false;
  const built = new Set(""" + DOCUMENTS + """.flatMap(d => d.roots().map(r => r.id)));
  return roots.every(e => built.has(e.getAttribute('data-root-id'))) }"""

# Every figure of the page with its glyph renderers: name, glyph type and, for a multi-line, how many
# lines it draws (one per flow), n its data rows; and whether the figure has a hover tool.
_FIGURES = """() => Bokeh.documents.flatMap(d => [...d.all_models])
  .filter(m => m.constructor.__name__ === 'Figure')
  .map(f => ({title: f.title ? f.title.text : '', renderers: f.renderers
    .filter(r => r.constructor.__name__ === 'GlyphRenderer').map(r => r.name || ''),
    glyphs: f.renderers.filter(r => r.constructor.__name__ === 'GlyphRenderer')
      .map(r => ({name: r.name || '', type: r.glyph.constructor.__name__,
                  lines: r.glyph.constructor.__name__ === 'MultiLine' ? r.data_source.data.xs.length : 1,
                  n: r.data_source.get_length()})),
    hover: f.toolbar.tools.some(t => t.constructor.__name__ === 'HoverTool')}))"""


@dataclass
class Shown:
    errors: list[str]
    figures: list[dict]
    png: Path
    links: list[str]  # every <a href> of the page, resolved (file:// URLs)
    text: str  # what the page reads (innerText)


def in_chromium(job: Callable[[Any], T]) -> T:
    """``job(browser)`` on this process's chromium (started if it is not running), on the browser's thread;
    skips the calling test when Playwright or Debian's chromium is missing."""
    global _runner
    pw = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed: cannot check that the page renders")
    if _runner is None:
        _runner = ThreadPoolExecutor(1, thread_name_prefix="chromium")
    return _runner.submit(_with_browser, pw, exe, job).result()


def _with_browser(pw: Any, exe: str, job: Callable[[Any], T]) -> T:
    browser = _held.get("browser")
    if browser is None or not browser.is_connected():  # first use, or chromium ended (crashed, killed)
        try:
            browser = _launch(pw, exe)
        except Exception:  # the driver is gone too: start both again
            _stop()
            browser = _launch(pw, exe)
        _held["browser"] = browser
    return job(browser)


def _launch(pw: Any, exe: str) -> Any:
    if "playwright" not in _held:
        _held["playwright"] = pw.sync_playwright().start()
    return _held["playwright"].chromium.launch(executable_path=exe, args=["--no-sandbox"])


def _stop() -> None:
    browser, playwright = _held.pop("browser", None), _held.pop("playwright", None)
    for end in (browser and browser.close, playwright and playwright.stop):
        if end is not None:
            try:
                end()
            except Exception:  # already gone: nothing left to end
                pass


def close_chromium() -> None:
    """End this process's chromium and Playwright's driver (the session's end)."""
    global _runner
    if _runner is not None:
        _runner.submit(_stop).result(timeout=60)
        _runner.shutdown()
        _runner = None


@contextmanager
def fresh_page(browser: Any, errors: list[str] | None = None, **context: Any) -> Iterator[Any]:
    """A page in a browser context of its own, closed (with everything the page made) afterwards, that
    may not reach the network. With ``errors``: its console errors, uncaught exceptions and network
    requests are appended there."""
    ctx = browser.new_context(**context)
    try:
        page = ctx.new_page()
        if errors is None:
            page.route("http*://**", lambda route: route.abort())
        else:
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route("http*://**", lambda route: (errors.append(f"network request: {route.request.url}"),
                                                    route.abort()))
        yield page
    finally:
        ctx.close()


def show(page_path: Path, png: Path, *, open_details: bool = False) -> Shown:
    """Load ``page_path`` from file:// with no network, wait for bokeh, screenshot it
    (after opening every <details> when ``open_details``)."""

    def job(browser: Any) -> Shown:
        errors: list[str] = []
        with fresh_page(browser, errors, viewport={"width": 1200, "height": 900}) as page:
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("window.Bokeh && Bokeh.documents.length > 0", timeout=30_000)
            page.wait_for_function(ALL_EMBEDDED, timeout=30_000)  # every output's, each when its BokehJS came
            page.wait_for_timeout(1000)  # bokeh paints its canvases after the document is built
            if open_details:
                page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
                page.wait_for_timeout(1000)
            figures = page.evaluate(_FIGURES)
            links = page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
            text = page.evaluate("() => document.body.innerText")
            page.screenshot(path=str(png), full_page=True)
            return Shown(errors, figures, png, links, text)

    return in_chromium(job)


def painted(png: Path) -> float:
    """The share of the screenshot's pixels that are not the white background."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3)
    return float((pixels < 250).any(axis=1).mean())


def has_colour(png: Path, rgb: tuple[int, int, int], tolerance: int = 12) -> bool:
    """Whether some pixel of the screenshot is ``rgb`` (within ``tolerance`` a channel)."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3).astype(int)
    return bool((np.abs(pixels - np.array(rgb)) <= tolerance).all(axis=1).any())
