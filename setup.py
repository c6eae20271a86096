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
LOOPS_H = ["netesto/engine/_loops.h"]  # what the C loops share

setup(
    ext_modules=[
        Extension(
            "netesto.engine._fastloop",
            ["netesto/engine/_fastloop.c", "netesto/engine/_fastloop_row.c", "netesto/engine/_fastloop_tick.c",
             "netesto/engine/_fastloop_sweep.c", "netesto/engine/_fastloop_block.c", "netesto/engine/_fastloop_rr.c",
             "netesto/engine/_fastloop_hist.c", "netesto/engine/_fastloop_lat.c", "netesto/engine/_fastloop_crc.c"],
            depends=["netesto/engine/_fastloop.h", "netesto/engine/_fastloop_mod.h", "netesto/engine/_fastloop_row.h",
                     *LOOPS_H],
            define_macros=[("NETESTO_ZLIB", "1")] if ZLIB else [],
            libraries=["z"] if ZLIB else [],
            optional=True,
        ),
        Extension(
            "netesto.engine._crrloop",
            ["netesto/engine/_crrloop.c", "netesto/engine/_crrloop_accept.c"],
            depends=["netesto/engine/_crrloop.h", *LOOPS_H],
            optional=True,
        ),
        Extension(
            "netesto.engine._rrloop",
            ["netesto/engine/_rrloop.c", "netesto/engine/_rrloop_steps.c", "netesto/engine/_rrloop_rows.c"],
            depends=["netesto/engine/_rrloop.h", *LOOPS_H],
            optional=True,
        ),
    ]
)
