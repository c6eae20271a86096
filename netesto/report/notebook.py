"""An executed notebook as one HTML page that opens offline (nbconvert)."""

from __future__ import annotations

from importlib import resources
import warnings
from pathlib import Path

TEMPLATE = "netesto-offline"


def export_html(notebook: str | Path, out: str | Path | None = None) -> Path:
    """``notebook`` rendered by nbconvert with netesto's offline template (no
    require.js, MathJax or widget code from a CDN; plots carry their own
    JavaScript); written beside it as ``.html`` unless ``out`` is given."""
    from nbconvert import HTMLExporter

    src = Path(notebook)
    base = resources.files("netesto.report_templates").joinpath("nbconvert")
    exporter = HTMLExporter(template_name=TEMPLATE, extra_template_basedirs=[str(base)])
    with warnings.catch_warnings():
        # nbconvert warns of each output it has no HTML for (a widget's model with no saved state): expected here
        warnings.simplefilter("ignore", UserWarning)
        body, _ = exporter.from_filename(str(src))
    dest = Path(out) if out else src.with_suffix(".html")
    dest.write_text(body, encoding="utf-8")
    return dest


__all__ = ["export_html"]
