"""The experiment book: which experiment, host and expName a command on a host means.

``exp=COUNTER`` takes the next number, ``exp=PREV`` (or no ``exp=``) the last
one; ``host=`` is qualified with the HOST_SUFFIX and becomes the default for
the commands after it; ``expName=`` likewise. The book also keeps what
PROCESS_EXP records (DESC, OTHER), the automatic DO_CLIENT groups and which
flows and fetches an experiment already has, and what the SET_LINKs waiting for
their flows asked (:class:`LinkBook`).
"""

from __future__ import annotations

from netesto.errors import ScriptError
from netesto.policy import MAX_EXP
from netesto.script import validate as V
from netesto.script.located import Args
from netesto.script.store import Counter

COMMON = ("exp", "host", "expName")


class LinkBook:
    """What the SET_LINKs since the last DO_CLIENT asked of each link, to refuse what contradicts it."""

    def __init__(self) -> None:
        self.times: dict[tuple[str, str], tuple[float, str]] = {}  # (host, param) -> (last time, file:line)
        self.traces: dict[str, str] = {}  # host -> file:line of its trace
        self.rates: dict[str, str] = {}  # host -> file:line of a rate
        self.dangling: ScriptError | None = None  # raised if the script ends before a DO_CLIENT

    def started(self) -> None:
        """A DO_CLIENT: the flows the schedule waited for; the next SET_LINK starts a new one."""
        self.times.clear()
        self.traces.clear()
        self.rates.clear()
        self.dangling = None


class Book:
    """The experiment and host bookkeeping of one interpreter (see the module doc)."""

    def __init__(self, counter: Counter, host_suffix: str, *, suffix_set: bool = False,
                 desc: str = "", other: tuple[tuple[str, str], ...] = ()) -> None:
        self.counter = counter
        self.host_suffix = host_suffix
        self.suffix_set = suffix_set  # by a HOST_SUFFIX command (kept in the State)
        self.desc = desc
        self.other = other
        self.last_host = ""
        self.last_exp: int | None = None
        self.last_exp_name = "Exp"
        self.group_exp: int | None = None
        self.group_next = 1
        self.fetched: set[tuple[str, int]] = set()
        self.pairs: dict[tuple[int, str, str, int], str] = {}  # (exp, host, server, group) -> file:line
        self.links = LinkBook()  # SET_LINK

    def common(self, args: Args, *, consume: bool = True) -> tuple[str, int, str]:
        """The host, exp and expName of a command run on a host (``consume``: with no
        exp= and no experiment yet, take one from the counter; else exp 0)."""
        return self.host(args), self.exp(args, consume=consume), self.exp_name(args)

    def exp(self, args: Args, *, consume: bool = True) -> int:
        if "exp" in args:
            raw = args.defined("exp")
            if raw in ("COUNTER", "counter"):
                value = self._take(args, args.col("exp"))
            elif raw in ("PREV", "prev"):
                if self.last_exp is None:
                    raise args.error_at("exp", "exp=PREV but there is no previous experiment",
                                        "use exp=COUNTER for the first command of an experiment")
                value = self.last_exp
            else:
                value = args.check("exp", lambda s: V.to_int(s, low=0, high=MAX_EXP))
        elif self.last_exp is not None:
            value = self.last_exp
        elif consume:
            value = self._take(args, args.node.col)
        else:
            return 0
        self.last_exp = value
        return value

    def _take(self, args: Args, col: int) -> int:
        value = self.counter.take()
        if not 0 <= value <= MAX_EXP:
            raise args.error(f"{args.name}: experiment number {value} from the counter is not in 0..{MAX_EXP}",
                             "reset the counter file (or give exp=N)", col=col)
        return value

    def qualify(self, host: str) -> str:
        """``host`` with the HOST_SUFFIX (unless it has a domain or is an address)."""
        if self.host_suffix and "." not in host and ":" not in host:
            return f"{host}.{self.host_suffix}"
        return host

    def host(self, args: Args, key: str = "host") -> str:
        """The host ``key=`` names (the last one named when it is not given)."""
        if key in args:
            raw = args.raw(key)
            args.check(key, lambda s: V.word(s, "host name"))
            host = self.qualify(raw)
            self.last_host = host
            return host
        if not self.last_host:
            raise args.error(f"{args.name}: host= is required", "no earlier command named a host")
        return self.last_host

    def exp_name(self, args: Args) -> str:
        if "expName" in args:
            raw = args.raw("expName")
            args.check("expName", lambda s: V.name(s, "expName"))
            self.last_exp_name = raw
        return self.last_exp_name

    def group(self, exp: int) -> int:
        """The next automatic DO_CLIENT group of ``exp`` (1, 2, 3...)."""
        if self.group_exp != exp:
            self.group_exp, self.group_next = exp, 1
        group = self.group_next
        self.group_next += 1
        return group


__all__ = ["Book", "COMMON", "LinkBook"]
