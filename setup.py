"""Build the optional C accelerator of the engine (the rest is in pyproject.toml).

Without a C compiler the build skips it (``optional=True``) and the engine
runs its pure-Python loops. With zlib's header (``zlib1g-dev``) the sampler's
tick also writes the flows' blocks in C (``_fastloop.TICK_WRITES``).
"""

import os
import sysconfig

from setuptools import Extension, setup


def _have_zlib() -> bool:
    dirs = {sysconfig.get_config_var("INCLUDEDIR") or "/usr/include", "/usr/include", "/usr/local/include"}
    return any(os.path.exists(os.path.join(d, "zlib.h")) for d in dirs)


ZLIB = _have_zlib()
NATIVE = "netesto/engine/native"  # each extension's sources in a folder of their own
LOOPS_H = [f"{NATIVE}/_loops.h"]  # what the C loops share


def _in(folder: str, *names: str) -> list[str]:
    return [f"{NATIVE}/{folder}/{name}" for name in names]


setup(
    ext_modules=[
        Extension(
            "netesto.engine.native._fastloop",
            _in("fastloop", "_fastloop.c", "_fastloop_hot.c", "_fastloop_row.c", "_fastloop_tick.c",
                "_fastloop_sweep.c", "_fastloop_block.c", "_fastloop_rr.c", "_fastloop_hist.c", "_fastloop_lat.c",
                "_fastloop_crc.c"),
            depends=[*_in("fastloop", "_fastloop.h", "_fastloop_mod.h", "_fastloop_row.h"), *LOOPS_H],
            define_macros=[("NETESTO_ZLIB", "1")] if ZLIB else [],
            libraries=["z"] if ZLIB else [],
            optional=True,
        ),
        Extension(
            "netesto.engine.native._crrloop",
            _in("crrloop", "_crrloop.c", "_crrloop_accept.c"),
            depends=[*_in("crrloop", "_crrloop.h"), *LOOPS_H],
            optional=True,
        ),
        Extension(
            "netesto.engine.native._rrloop",
            _in("rrloop", "_rrloop.c", "_rrloop_steps.c", "_rrloop_rows.c"),
            depends=[*_in("rrloop", "_rrloop.h"), *LOOPS_H],
            optional=True,
        ),
    ]
)
