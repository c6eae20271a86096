"""The built-in flow engine: client and server worker processes, the test types, sampling on a grid.

``python -m netesto.engine server|client`` is what an agent runs. Flows whose
driver is a peer tool run through :mod:`netesto.drivers`; the per-socket and
per-host measurements come from :mod:`netesto.collectors`; everything is written
in the formats of :mod:`netesto.raw`.
"""
