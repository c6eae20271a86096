"""Sampling and records: every flow end sampled on its grid, the rows and files that keep what it did.

:mod:`~netesto.engine.sampling.sampler` (the worker's Sampler: one sweep per
grid point, hot rows at the flow ends' idle points),
:mod:`~netesto.engine.sampling.flowrecord` (a flow end's counters, rows and
``.nflow`` file), :mod:`~netesto.engine.sampling.records` (the row's layout and
builder, C or Python), :mod:`~netesto.engine.sampling.histogram` (the latency
histogram, counted in C when it can be). They know no test type and no process.
"""
