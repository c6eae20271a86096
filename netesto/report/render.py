"""Jinja2 rendering of netesto's report templates, or a user's own that replace them."""

from __future__ import annotations

import os
from importlib import resources
from typing import Any, Mapping

from netesto.errors import UsageError


def render(name: str, context: Mapping[str, Any], *, templates: str | os.PathLike[str] | None = None) -> str:
    """Template ``name`` rendered with ``context``; a ``templates`` directory is
    searched first, so a user's ``sweep.html.j2`` replaces netesto's."""
    import jinja2

    loaders: list[jinja2.BaseLoader] = []
    if templates is not None:
        if not os.path.isdir(templates):
            raise UsageError(f"report templates {os.fspath(templates)!r}: no such directory")
        loaders.append(jinja2.FileSystemLoader(os.fspath(templates)))
    loaders.append(jinja2.FileSystemLoader(str(resources.files("netesto.report_templates"))))
    env = jinja2.Environment(loader=jinja2.ChoiceLoader(loaders), autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    try:
        return env.get_template(name).render(**context)
    except jinja2.TemplateNotFound:
        raise UsageError(f"report template {name!r} not found") from None
    except jinja2.TemplateError as exc:
        raise UsageError(f"report template {name!r}: {exc}") from exc


__all__ = ["render"]
