"""The built-in flow engine: client and server worker processes, the test types, sampling on a grid.

``python -m netesto.engine server|client`` is what an agent runs. Flows whose
driver is a peer tool run through :mod:`netesto.drivers`; the per-socket and
per-host measurements come from :mod:`netesto.collectors`; everything is written
in the formats of :mod:`netesto.raw`.

The parts, highest first; each imports only those below it (``sampling`` and
``core`` side by side), and tests/test_layers.py holds the walls::

    __main__.py  python -m netesto.engine server|client
    serve/       the processes: the server (server, accept, tokens) and the client's workers
                 (workers); each hands a flow to its test type
    kinds/       the test types: the bases every end builds on (flowend: FlowEnd and its Worker;
                 clientrun, client: a client end, and TCP_STREAM/MAERTS/BIDIR's; serverflow: a
                 server end, and TCP_STREAM/MAERTS/BIDIR's and TCP_CRR's; lowat: their receivers'
                 low-water mark), then one module per
                 other end (client_rr, server_rr, rrgroup; client_crr; client_udp, server_udp),
                 none importing another test type's
    sampling/    every flow end sampled on its grid: sampler, flowrecord, records, histogram
    core/        what the processes and the test types share: loop (a worker's epoll loop),
                 handshake, balance (the server workers' load board), realtime
    native/      the optional C loops, loaded by fastloop and crrfast (None where one is not
                 built: the Python twins run); each extension's sources in a folder of their own
                 (fastloop/, crrloop/, rrloop/), whose files call one way
"""
