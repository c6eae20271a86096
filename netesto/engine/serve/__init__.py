"""The engine's processes: the server and its workers, the client's workers; each gives a flow to its test type.

:mod:`~netesto.engine.serve.server` (listen, start and watch the server
processes), :mod:`~netesto.engine.serve.accept` (a server process: accept,
handshake, a flow to its test type here or to the least-loaded process),
:mod:`~netesto.engine.serve.tokens` (the experiment tokens a server accepts),
:mod:`~netesto.engine.serve.workers` (the client: worker processes, a flow to
its test type or to a peer tool's driver, one stream of events).
"""
