"""What netesto allows on a host, in one place: the script checks it at plan time, the agent enforces it.

Stdlib only: lab hosts import it with the agent. (The sysctl, module-parameter and
qdisc allowlists still live in ``netesto.agent.control`` and
``netesto.script.validate``; moving them here is the re-plan's next step.)
"""

from __future__ import annotations

import re

MAX_FLOW_SECONDS = 86_400.0  # a flow's dur: the engine refuses longer flows (a day is plenty for a test)
MAX_EXP = 2**31 - 1  # experiment numbers: the original's 32-bit integer
TOOL_PORTS = (1024, 65535)  # ports for the iperf3/netserver servers an agent starts: never privileged ones

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


__all__ = ["MAX_EXP", "MAX_FLOW_SECONDS", "MAX_OTHER_WORDS", "TOOL_PORTS", "qdisc_other_words"]
