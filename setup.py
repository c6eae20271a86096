"""Build the optional C accelerator of the engine's solo TCP_RR loops (the rest is in pyproject.toml).

Without a C compiler the build skips it (``optional=True``) and the engine
runs its pure-Python loops.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "netesto.traffic._fastloop",
            ["netesto/traffic/_fastloop.c"],
            optional=True,
        )
    ]
)
