"""What the processes and the test types share, importing nothing else of the engine.

:mod:`~netesto.engine.core.loop` (a worker's epoll loop with timers),
:mod:`~netesto.engine.core.handshake` (a test connection's hello and a CRR
join, as both ends speak them), :mod:`~netesto.engine.core.balance` (the
server workers' shared load board and CRR table; how a client deals its flows
to its workers), :mod:`~netesto.engine.core.realtime` (a worker's real-time
hold before a start instant).
"""
