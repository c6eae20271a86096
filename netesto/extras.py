"""Which of netesto's extras installs a missing module, read from the package's own requirements.

The requirements come from ``pyproject.toml`` when netesto runs from a source
tree (an ``*.egg-info`` left in the tree can be older than it) and from the
installed distribution's metadata otherwise, so the extras are written down
once, in ``pyproject.toml``. An extra that needs another (``plots`` needs
``netesto[results]``) provides what that one does too.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path

# Distributions (lower-case names) whose import name is not their own name with '-' as '_';
# tests/test_extras.py checks each against the installed packages.
IMPORT_NAMES = {"pyzmq": "zmq", "ipython": "IPython", "pillow": "PIL", "pytest-xdist": "xdist"}
CORE = ""  # the key of the core requirements (no extra)
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def source_root() -> Path | None:
    """The source tree netesto runs from (its ``pyproject.toml`` beside the package), if any."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and re.search(r'^name\s*=\s*"netesto"', pyproject.read_text(), re.M):
        return root
    return None


def parse_requirement(text: str) -> tuple[str, tuple[str, ...], str]:
    """``(name, extras, version spec)`` of a requirement, its marker dropped.

    >>> parse_requirement('netCDF4>=1.6; extra == "results"')
    ('netCDF4', (), '>=1.6')
    >>> parse_requirement("netesto[sweep,lab]")
    ('netesto', ('sweep', 'lab'), '')
    """
    body = text.split(";", 1)[0]
    m = _NAME.match(body)
    if m is None:
        raise ValueError(f"not a requirement: {text!r}")
    extras = tuple(e.strip() for e in (m.group(2) or "").split(",") if e.strip())
    return m.group(1), extras, body[m.end():].strip()


def import_name(distribution: str) -> str:
    """The top-level module a distribution installs.

    >>> import_name("pyzmq"), import_name("netCDF4"), import_name("pytest-timeout")
    ('zmq', 'netCDF4', 'pytest_timeout')
    """
    return IMPORT_NAMES.get(distribution.lower(), distribution.replace("-", "_"))


@lru_cache(maxsize=1)
def requirements() -> dict[str, tuple[str, ...]]:
    """Each extra's requirement strings as written (``""``: the core), in pyproject's order."""
    root = source_root()
    if root is not None:
        import tomllib

        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
        out = {CORE: tuple(project.get("dependencies", []))}
        out.update({k: tuple(v) for k, v in project.get("optional-dependencies", {}).items()})
        return out
    from importlib import metadata

    try:
        return from_metadata(metadata.requires("netesto") or [])
    except metadata.PackageNotFoundError:
        return {}


def from_metadata(lines: list[str]) -> dict[str, tuple[str, ...]]:
    """:func:`requirements` from a distribution's ``Requires-Dist`` lines.

    >>> from_metadata(["pyzmq>=25", 'numpy>=1.24; extra == "results"'])
    {'': ('pyzmq>=25',), 'results': ('numpy>=1.24',)}
    """
    found: dict[str, list[str]] = {CORE: []}
    for line in lines:
        req, _, marker = line.partition(";")
        extra = _EXTRA_MARKER.search(marker)
        found.setdefault(extra.group(1) if extra else CORE, []).append(req.strip())
    return {k: tuple(v) for k, v in found.items()}


def provides(extra: str) -> dict[str, str]:
    """Every distribution ``extra`` installs -> its version spec: the core's first, then those
    of the extras it names, then its own, each in pyproject's order."""
    reqs = requirements()
    out: dict[str, str] = {}
    seen: set[str] = set()

    def walk(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        if name != CORE:
            walk(CORE)
        for req in reqs.get(name, ()):
            dist, extras, spec = parse_requirement(req)
            if dist.lower() == "netesto":
                for included in extras or (CORE,):
                    walk(included)
            else:
                out.setdefault(dist, spec)

    walk(extra)
    return out


def extra_for(module: str, preferred: str | None = None) -> str | None:
    """The extra that installs ``module`` (a top-level module name): ``preferred`` if it does
    (a command names the extra it needs whole, so one install is enough), else the extra that
    installs the fewest distributions with it; ``""`` for the core, None if no extra has it."""
    top = module.split(".")[0]
    having = [e for e in requirements() if top in {import_name(d) for d in provides(e)}]
    if not having:
        return None
    if preferred in having:
        return preferred
    return min(having, key=lambda e: (len(provides(e)), list(requirements()).index(e)))


def install_command(extra: str) -> str:
    """The pip command that installs netesto with ``extra`` the way this netesto was installed:
    from its source tree, from the wheel or directory it came from, else by name."""
    target, editable = "netesto", False
    root = source_root()
    if root is not None:
        target, editable = str(root), True
    else:
        from importlib import metadata

        try:
            origin = json.loads(metadata.distribution("netesto").read_text("direct_url.json") or "{}")
        except (metadata.PackageNotFoundError, ValueError):
            origin = {}
        url = origin.get("url", "")
        if url.startswith("file://"):
            from urllib.parse import unquote

            target, editable = unquote(url.removeprefix("file://")), bool(origin.get("dir_info", {}).get("editable"))
    spec = f"{target}[{extra}]" if extra else target
    return f"{sys.executable} -m pip install {'-e ' if editable else ''}'{spec}'"


def install_hint(module: str, preferred: str | None = None) -> str | None:
    """``the 'plots' extra has it: <pip command>`` for a missing ``module``; None if no extra has it."""
    extra = extra_for(module, preferred)
    if extra is None:
        return None
    if extra == CORE:
        return f"netesto's own requirements have it (a broken install?): {install_command(CORE)}"
    return f"the '{extra}' extra has it: {install_command(extra)}"


__all__ = ["CORE", "IMPORT_NAMES", "extra_for", "from_metadata", "import_name", "install_command", "install_hint", "parse_requirement",
           "provides", "requirements", "source_root"]
