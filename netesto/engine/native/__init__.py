"""The engine's optional C loops: each extension's sources in a folder of their own, and their Python faces.

:mod:`~netesto.engine.native.fastloop` loads ``_fastloop`` and ``_rrloop``,
:mod:`~netesto.engine.native.crrfast` loads ``_crrloop``. Each gives None for
an extension that is not built (``setup.py`` builds them ``optional=True``:
an install without a C compiler skips them), under ``NETESTO_PURE_PYTHON=1``,
or where ``time.perf_counter`` is not on CLOCK_MONOTONIC; the engine then runs
its Python twins of every loop. The sources, one folder per extension; in
each, the file named after the extension holds its module, which adds what the
other files lend it, and below it the files call one way (tests/test_layers.py)::

    _loops.h    what the three share: the clock, deadlines, state buffers, the SAMPLE_API capsule
    fastloop/   _fastloop: the hot rows (its SAMPLE_API), the lone TCP_RR loops, the sampler's rows,
                tick and sweep, block writes (crc32), the latencies' histogram and summary
    crrloop/    _crrloop: the TCP_CRR client loop, the server's accept of CRR joins
    rrloop/     _rrloop: many TCP_RR flow ends of one worker in one epoll loop, their sampler rows
"""
