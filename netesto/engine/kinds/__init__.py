"""The test types: each one's client and server end, and the flow end they all build on.

The bases: :mod:`~netesto.engine.kinds.flowend` (``FlowEnd``, every end's
base, and the ``Worker`` its process gives it),
:mod:`~netesto.engine.kinds.clientrun` and :mod:`~netesto.engine.kinds.client`
(a client end: connect, handshake, start on time, run, end; TCP_STREAM, MAERTS
and BIDIR's client), :mod:`~netesto.engine.kinds.serverflow` (a server end and
what it sees of its process; TCP_STREAM, MAERTS, BIDIR and TCP_CRR's server).
One module per other end: ``client_rr``, ``server_rr`` and ``rrgroup`` (TCP_RR,
its ends alone or in one C loop per worker), ``client_crr`` (TCP_CRR),
``client_udp`` and ``server_udp`` (UDP_STREAM, UDP_RR). A test type's module
imports the bases and its own test type's other modules, never another test
type's (tests/test_layers.py holds this).
"""
