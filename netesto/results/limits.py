"""What limited each flow: the shares of its sender's life limited by the receiver's window, its own
send buffer, the network, or the application, from TCP_INFO's chrono counters.

The kernel counts, per socket, the time it was busy sending (``busy_time``)
and, within that, the time the receiver's window stopped it
(``rwnd_limited``) or its send buffer ran dry of new data while the
network could take more (``sndbuf_limited``), in us of jiffies (4 ms at
HZ=250). Over the sender's rows (first to last, its life):

* ``rwnd_limited_share``: the receiver's window (its receive buffer);
* ``sndbuf_limited_share``: the sender's send buffer;
* ``network_limited_share``: busy and neither of those: cwnd or pacing, the network;
* ``app_limited_share``: not busy: the application had nothing to send.

The first two are the host, not the network: :data:`HOST_LIMIT_PERCENT`
of a flow's life or more gets a warning.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netesto.raw.nflow import RawFlow

# Above this share of its life limited by its own hosts' buffers (rwnd + sndbuf), a flow is named in the
# run's output and on its page. Measured on the testbed (100 Mbit/s, 20 ms, buffers sized for it), flows
# that nothing held back showed 0-0.5 % (rwnd, in slow start, before the receive buffer had grown); the
# chrono counters move in jiffies (4 ms at HZ=250), a few of which are 1-2 % of a 1 s flow; a bbr flow
# with a 16 KiB send buffer showed 67 %. 5 % is above the noise, and low enough that a buffer that
# capped the window for a twentieth of the flow is not passed over.
HOST_LIMIT_PERCENT = 5.0
SHARES = ("rwnd_limited_share", "sndbuf_limited_share", "network_limited_share", "app_limited_share")
COUNTERS = ("busy_time", "rwnd_limited", "sndbuf_limited")


def limit_shares(sender: RawFlow | None, test: str = "TCP_STREAM") -> dict[str, float]:
    """The four shares (percent) of the sender's life (see the module); NaN for files without the
    counters (drivers), UDP tests and ends with under two rows.

    >>> from array import array
    >>> cols = {"t_mono": array("d", [0.0, 1.0, 2.0]), "busy_time": array("Q", [0, 900_000, 1_800_000]),
    ...         "rwnd_limited": array("Q", [0, 0, 100_000]), "sndbuf_limited": array("Q", [0, 300_000, 500_000])}
    >>> limit_shares(RawFlow("f.nflow", {}, cols))
    {'rwnd_limited_share': 5.0, 'sndbuf_limited_share': 25.0, 'network_limited_share': 60.0, 'app_limited_share': 10.0}
    """
    nan = dict.fromkeys(SHARES, math.nan)
    if sender is None or sender.rows < 2 or test.startswith("UDP") or not all(c in sender.columns for c in COUNTERS):
        return nan
    t = sender.columns["t_mono"]
    life = (t[-1] - t[0]) * 1e6
    if not life > 0:
        return nan
    busy, rwnd, sndbuf = (float(sender.columns[c][-1]) - float(sender.columns[c][0]) for c in COUNTERS)
    share = lambda us: round(100.0 * min(max(us, 0.0), life) / life, 3)  # noqa: E731
    net = busy - rwnd - sndbuf
    return {"rwnd_limited_share": share(rwnd), "sndbuf_limited_share": share(sndbuf),
            "network_limited_share": share(net), "app_limited_share": share(life - busy)}


def host_limited(ds: Any) -> list[str]:
    """One line per flow of an experiment dataset limited by its own host's buffers for
    :data:`HOST_LIMIT_PERCENT` of its life or more (the run's output and the page say these)."""
    out: list[str] = []
    if "sndbuf_limited_share" not in ds:
        return out
    for fid in ds["flow"].values:
        f = ds.sel(flow=fid)
        snd, rwnd = float(f["sndbuf_limited_share"]), float(f["rwnd_limited_share"])
        host = np.nansum([snd, rwnd])
        if host >= HOST_LIMIT_PERCENT:
            why = []
            if snd > 0:
                why.append(f"its sender's send buffer {snd:.0f} % (localBuffer=, net.ipv4.tcp_wmem)")
            if rwnd > 0:
                why.append(f"the receiver's window {rwnd:.0f} % (remoteBuffer=, net.ipv4.tcp_rmem)")
            out.append(f"flow {fid} was limited by its hosts' buffers for {host:.0f} % of its life, not by "
                       f"the network: {', '.join(why)}")
    return out


__all__ = ["COUNTERS", "HOST_LIMIT_PERCENT", "SHARES", "host_limited", "limit_shares"]
