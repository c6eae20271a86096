"""IPython extension: ``%%netesto`` and ``%netesto`` magics with ipywidgets progress.

``%load_ext netesto`` (or ``%load_ext netesto.magics``) registers them. The
magics only parse their line and call the library (:func:`netesto.run`,
:func:`netesto.plan`); this is the only package that imports IPython.
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Register :class:`~netesto.magics.cellmagic.NetestoMagics` with ``ipython``."""
    from netesto.magics.cellmagic import NetestoMagics

    ipython.register_magics(NetestoMagics)


__all__ = ["load_ipython_extension"]
