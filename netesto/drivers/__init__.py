"""Peer tools run as flow engines: iperf3 and netperf, each writing the same ``.nflow`` files as the engine."""
