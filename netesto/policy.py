"""What netesto allows on a host, in one place: the script checks it at plan time, the agent enforces it.

Stdlib only: lab hosts import it with the agent. A plan refuses exactly what an
agent would refuse (tests/test_policy.py walks these tables through both).
"""

from __future__ import annotations

import re

MAX_FLOW_SECONDS = 86_400.0  # a flow's dur: the engine refuses longer flows (a day is plenty for a test)
MAX_EXP = 2**31 - 1  # experiment numbers: the original's 32-bit integer
TOOL_PORTS = (1024, 65535)  # ports for the iperf3/netserver servers an agent starts: never privileged ones

# Limits on what one request, one agent or one shown line may hold, each refused at the
# boundary with an error naming it. Each number was reached by hand first (issue 32).
MAX_FLOWS_PER_REQUEST = 1000  # start_flows: 3,000 flows of one request took 82 s, 5 GB and a 2.3 GB exp.nc to collect
MAX_PORTS_PER_REQUEST = 64  # prepare_server: iperf3 servers start in turn inside the agent's loop (~25 ms each);
#                             5,000 ports kept it from answering (hello, SIGTERM) while ~1,000 started
MAX_TOOL_SERVERS = 256  # iperf3/netserver servers one agent keeps at once: each is a process, a pipe and a thread
MAX_CONNECTIONS = 128  # controllers connected to one agent at once: 5,000 idle ones held 5,000 descriptors
MAX_CONNECTIONS_PER_ADDRESS = 32  # of them, from one address: one host cannot take every place
HANDSHAKE_SECONDS = 5.0  # a connection that has not finished its CURVE handshake by then is closed (libzmq: 30 s)
MAX_CLAIM_RUN = 64  # characters of a claim's run id (shown to other controllers)
MAX_CLAIM_CONTROLLER = 200  # characters of a claim's controller name ("user@host pid N")
MAX_TOKEN = 128  # characters of a claim token (the controller's are 32 hex digits)
MAX_SHOWN_TEXT = 2000  # characters of one peer's string shown on a terminal or in a log line

# sysctl -> per-value (low, high) ranges (the original's), or NAME / NAMES: one or more words.
NAME, NAMES = "a name", "names"
BUF_RANGE = (2621440, 67108864)
TCP_MEM_RANGES = ((4096, 10000), (16000, 270000), (128000, 61000000))
SYSCTLS: dict[str, tuple[tuple[int, int], ...] | str] = {
    "net.core.rmem_max": (BUF_RANGE,),
    "net.core.wmem_max": (BUF_RANGE,),
    "net.ipv4.tcp_rmem": TCP_MEM_RANGES,
    "net.ipv4.tcp_wmem": TCP_MEM_RANGES,
    "net.ipv4.tcp_ecn": ((0, 2),),
    "net.ipv4.tcp_no_metrics_save": ((0, 1),),
    "net.core.default_qdisc": NAME,
    "net.ipv4.tcp_congestion_control": NAME,
    "net.ipv4.tcp_allowed_congestion_control": NAMES,
}
# Spellings from the original's README and paper.
SYSCTL_ALIASES = {"net.core.rmem.max": "net.core.rmem_max", "net.core.wmem.max": "net.core.wmem_max"}

MODULE_PARAMS: dict[str, tuple[str, ...]] = {
    "tcp_nv": ("nv_pad", "nv_reset_period", "nv_min_cwnd"),
    "tcp_cubic": ("fast_convergence", "initial_ssthresh", "tcp_friendliness", "hystart",
                  "hystart_detect", "hystart_low_window", "hystart_ack_delta"),
    "tcp_dctcp": ("dctcp_shift_g", "dctcp_alpha_on_init", "dctcp_clamp_alpha_on_loss"),
}

QDISCS = (
    "bfifo", "cake", "choke", "codel", "drr", "fq", "fq_codel", "fq_pie", "hfsc", "htb",
    "mq", "netem", "noqueue", "pfifo", "pfifo_fast", "pfifo_head_drop", "pie", "prio",
    "red", "sfb", "sfq", "tbf",
)
QDISC_ACTIONS = ("", "add", "change", "replace", "del", "delete")
_NAME_WORD = re.compile(r"^[a-z0-9_]{1,16}$")  # congestion controls, qdiscs: what /proc/sys takes


def describe(name: str) -> str:
    """What sysctl ``name`` takes, for messages: ``"3 integers in 4096..10000, ..."`` or ``"a name"``."""
    rule = SYSCTLS[name]
    if isinstance(rule, str):
        return rule
    return f"{len(rule)} integer(s) in " + ", ".join(f"{lo}..{hi}" for lo, hi in rule)


def check_sysctl(name: str, values: list[str]) -> str:
    """The value to write for sysctl ``name`` (its words joined by spaces); KeyError when
    the name is not allowed, ValueError saying what is wrong with the values.

    >>> check_sysctl("net.ipv4.tcp_rmem", ["4096", "87380", "6291456"])
    '4096 87380 6291456'
    >>> check_sysctl("net.ipv4.tcp_ecn", ["3"])
    Traceback (most recent call last):
    ...
    ValueError: 3 is outside 0..2
    """
    rule = SYSCTLS[SYSCTL_ALIASES.get(name, name)]
    if isinstance(rule, str):
        if not values or (rule == NAME and len(values) != 1):
            raise ValueError(f"expected {rule}")
        for v in values:
            if not _NAME_WORD.match(v):
                raise ValueError(f"{v[:60]!r} is not a valid name")
        return " ".join(values)
    if len(values) != len(rule):
        raise ValueError(f"expected {len(rule)} value(s), got {len(values)}")
    out = []
    for text, (lo, hi) in zip(values, rule):
        if not re.fullmatch(r"\d{1,12}", text):
            raise ValueError(f"{text[:40]!r} is not a non-negative integer")
        if not lo <= int(text) <= hi:
            raise ValueError(f"{int(text)} is outside {lo}..{hi}")
        out.append(str(int(text)))
    return " ".join(out)


_OTHER_WORD = re.compile(r"[A-Za-z0-9_.:/%-]{1,40}")
MAX_OTHER_WORDS = 24


def qdisc_other_words(text: str) -> list[str]:
    """SET_QDISC ``other=``: the extra ``tc`` words, split at commas (scripts) or spaces (the wire).

    >>> qdisc_other_words("mpu,64")
    ['mpu', '64']
    >>> qdisc_other_words("mpu 64 $(reboot)")
    Traceback (most recent call last):
    ...
    ValueError: '$(reboot)' is not a tc word: up to 40 of [A-Za-z0-9_.:/%-]
    """
    words = [w for w in re.split(r"[,\s]+", text) if w]
    if len(words) > MAX_OTHER_WORDS:
        raise ValueError(f"{len(words)} words: at most {MAX_OTHER_WORDS}")
    for w in words:
        if not _OTHER_WORD.fullmatch(w):
            raise ValueError(f"{w[:60]!r} is not a tc word: up to 40 of [A-Za-z0-9_.:/%-]")
    return words


__all__ = [
    "HANDSHAKE_SECONDS",
    "MAX_CLAIM_CONTROLLER",
    "MAX_CLAIM_RUN",
    "MAX_CONNECTIONS",
    "MAX_CONNECTIONS_PER_ADDRESS",
    "MAX_EXP",
    "MAX_FLOWS_PER_REQUEST",
    "MAX_FLOW_SECONDS",
    "MAX_OTHER_WORDS",
    "MAX_PORTS_PER_REQUEST",
    "MAX_SHOWN_TEXT",
    "MAX_TOKEN",
    "MAX_TOOL_SERVERS",
    "MODULE_PARAMS",
    "NAME",
    "NAMES",
    "QDISCS",
    "QDISC_ACTIONS",
    "SYSCTLS",
    "SYSCTL_ALIASES",
    "TOOL_PORTS",
    "check_sysctl",
    "describe",
    "qdisc_other_words",
]
