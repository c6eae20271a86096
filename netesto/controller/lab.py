"""The Lab: which agents exist, where they listen, their keys and test addresses.

A lab comes from the TOML lab file the testbed writes (``Lab.from_file``), from
a dict (``Lab.from_dict``, notebooks), from keyword arguments (``Lab.of``) or,
for tests and benchmarks, ``Lab.loopback(n)``. Script host names are resolved
with :meth:`Lab.resolve`: an exact name first, then the name with the lab's
``host_suffix`` (or any domain) removed, the original's HOST_SUFFIX
convention, so a script's ``h1.mynetwork.com`` finds lab host ``h1``.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from netesto.errors import LabError
from netesto.labfile import TESTBED_KEYS, LabFile, render_lab
from netesto.labfile import LabHost as FileHost

DEFAULT_PORT = 12870
# Interface names the agents accept (Linux IFNAMSIZ-1 characters, no blanks or '/').
_DEV = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")
_LAB_KEYS = frozenset({"name", "host_suffix", "controller_key", "insecure"})
_HOST_KEYS = frozenset({"control", "port", "test", "public_key", "shape", "role", "dev"})
_SHAPE_KEYS = frozenset({"agent", "dev"})
ROLES = ("host", "router")


def _check_keys(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise LabError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def _check_dev(dev: str, where: str) -> None:
    if not isinstance(dev, str) or not _DEV.match(dev):
        raise LabError(f"{where}: bad device name {dev!r} (up to 15 letters, digits, _ . @ -)")


def _check_address(text: str, where: str) -> str:
    if not isinstance(text, str) or not text.strip() or any(c.isspace() for c in text):
        raise LabError(f"{where}: bad address {text!r}")
    return text.strip()


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Shape:
    """Where SET_QDISC/SET_NETEM for a host apply: agent ``agent``, device ``dev``."""

    agent: str
    dev: str

    def __post_init__(self) -> None:
        _check_dev(self.dev, f"shape agent {self.agent!r}")


@dataclass(frozen=True)
class LabHost:
    """One agent of the lab."""

    name: str
    control: str
    port: int = DEFAULT_PORT
    test: str = ""  # address flows use; "" = the control address
    public_key: Path | None = None  # the agent's zmq.auth public key file
    shape: Shape | None = None
    role: str = "host"
    dev: str = ""  # the host's own test interface ("" = let the agent pick)

    def __post_init__(self) -> None:
        where = f"lab host {self.name!r}"
        if not self.name or any(c.isspace() for c in self.name):
            raise LabError(f"bad lab host name {self.name!r}")
        _check_address(self.control, where)
        if self.test:
            _check_address(self.test, where)
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 0 < self.port < 65536:
            raise LabError(f"{where}: bad port {self.port!r} (1..65535)")
        if self.role not in ROLES:
            raise LabError(f"{where}: bad role {self.role!r}; one of {', '.join(ROLES)}")
        if self.dev:
            _check_dev(self.dev, where)

    @property
    def test_address(self) -> str:
        return self.test or self.control

    @property
    def short(self) -> str:
        """The name up to the first dot (used in flow ids and file names)."""
        return self.name.split(".", 1)[0]


@dataclass(frozen=True)
class Lab:
    """A set of agents plus how the controller authenticates to them."""

    hosts: tuple[LabHost, ...]
    name: str = "lab"
    host_suffix: str = ""
    controller_key: Path | None = None  # the controller's zmq.auth secret key file
    insecure: bool = False
    path: Path | None = field(default=None, compare=False)
    # The bottleneck of the testbed the lab is (bw, rtt, buffer, loss, jitter, as a result's
    # parameters): the lab file's [testbed] table, which the testbed writes and rewrites when it
    # is reshaped; experiment.json keeps it.
    testbed: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        names = [h.name for h in self.hosts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise LabError(f"lab {self.name!r}: duplicate host(s) {', '.join(dup)}")
        if not self.hosts:
            raise LabError(f"lab {self.name!r} has no hosts")
        shorts: dict[str, str] = {}
        for h in self.hosts:
            other = shorts.setdefault(h.short, h.name)
            if other != h.name:
                raise LabError(
                    f"lab {self.name!r}: hosts {other} and {h.name} share the short name {h.short!r} "
                    "that names their data files (flows, statistics): rename one")
        for h in self.hosts:
            if h.shape is not None and h.shape.agent not in names:
                raise LabError(
                    f"lab host {h.name!r}: shape agent {h.shape.agent!r} is not a lab host"
                    f"{_suggest(h.shape.agent, names)}"
                )
        if self.insecure:
            remote = [h.name for h in self.hosts if not is_loopback(h.control)]
            if remote:
                raise LabError(
                    f"lab {self.name!r}: insecure (no CURVE) is allowed only on loopback; "
                    f"host(s) {', '.join(remote)} have non-loopback control addresses"
                )
        else:
            if self.controller_key is None:
                raise LabError(f"lab {self.name!r}: controller_key missing (or set insecure = true)")
            if not self.controller_key.is_file():
                raise LabError(f"lab {self.name!r}: controller key file {self.controller_key} not found")
            for h in self.hosts:
                if h.public_key is None:
                    raise LabError(f"lab host {h.name!r}: public_key missing")
                if not h.public_key.is_file():
                    raise LabError(f"lab host {h.name!r}: public key file {h.public_key} not found")

    def __iter__(self) -> Iterator[LabHost]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not None

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def _find(self, name: str) -> LabHost | None:
        for h in self.hosts:
            if h.name == name:
                return h
        candidates = []
        if self.host_suffix and name.endswith("." + self.host_suffix):
            candidates.append(name[: -len(self.host_suffix) - 1])
        if "." in name:
            candidates.append(name.split(".", 1)[0])
        for cand in candidates:
            for h in self.hosts:
                if h.name == cand:
                    return h
        # A script may name a host by its address.
        for h in self.hosts:
            if name in (h.control, h.test):
                return h
        return None

    def resolve(self, name: str) -> LabHost:
        """The lab host a script's host name means, else LabError with did-you-mean."""
        found = self._find(name)
        if found is None:
            short = name.split(".", 1)[0]
            raise LabError(
                f"host {name!r} is not in lab {self.name!r} (hosts: {', '.join(self.names)})"
                f"{_suggest(short, self.names)}"
            )
        return found

    def host(self, name: str) -> LabHost:
        return self.resolve(name)

    @classmethod
    def from_file(cls, path: str | Path) -> "Lab":
        """Read a TOML lab file; key paths are relative to the file."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text())
        except FileNotFoundError as exc:
            raise LabError(f"lab file {p} not found") from exc
        except OSError as exc:
            raise LabError(f"lab file {p}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise LabError(f"lab file {p}: bad TOML: {exc}") from exc
        return cls.from_dict(data, base_dir=p.resolve().parent, path=p)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, base_dir: str | Path | None = None, path: Path | None = None
    ) -> "Lab":
        """A lab from the lab file's structure: ``{"lab": {...}, "hosts": {name: {...}}}``."""
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        where = f"lab file {path}" if path else "lab"
        _check_keys(data, frozenset({"lab", "hosts", "testbed"}), where)
        top = data.get("lab", {})
        if not isinstance(top, Mapping):
            raise LabError(f"{where}: [lab] must be a table")
        _check_keys(top, _LAB_KEYS, f"{where} [lab]")
        hosts_data = data.get("hosts", {})
        if not isinstance(hosts_data, Mapping) or not hosts_data:
            raise LabError(f"{where}: no [hosts.NAME] tables")

        def keypath(value: Any, what: str) -> Path | None:
            if value in (None, ""):
                return None
            if not isinstance(value, (str, Path)):
                raise LabError(f"{where}: {what} must be a path, got {value!r}")
            kp = Path(value).expanduser()
            return kp if kp.is_absolute() else base / kp

        hosts = []
        for name, hd in hosts_data.items():
            hwhere = f"{where} [hosts.{name}]"
            if not isinstance(hd, Mapping):
                raise LabError(f"{hwhere} must be a table")
            _check_keys(hd, _HOST_KEYS, hwhere)
            if "control" not in hd:
                raise LabError(f"{hwhere}: 'control' (the agent's address) is missing")
            shape = None
            if "shape" in hd:
                sd = hd["shape"]
                if not isinstance(sd, Mapping) or "agent" not in sd or "dev" not in sd:
                    raise LabError(f"{hwhere}: shape must be {{ agent = NAME, dev = DEV }}")
                _check_keys(sd, _SHAPE_KEYS, f"{hwhere} shape")
                shape = Shape(agent=str(sd["agent"]), dev=str(sd["dev"]))
            hosts.append(
                LabHost(
                    name=str(name),
                    control=hd["control"],
                    port=hd.get("port", DEFAULT_PORT),
                    test=hd.get("test", ""),
                    public_key=keypath(hd.get("public_key"), f"[hosts.{name}] public_key"),
                    shape=shape,
                    role=hd.get("role", "host"),
                    dev=hd.get("dev", ""),
                )
            )
        insecure = top.get("insecure", False)
        if not isinstance(insecure, bool):
            raise LabError(f"{where}: insecure must be true or false")
        testbed = data.get("testbed", {})
        if not isinstance(testbed, Mapping):
            raise LabError(f"{where}: [testbed] must be a table")
        _check_keys(testbed, frozenset(TESTBED_KEYS), f"{where} [testbed]")
        return cls(
            hosts=tuple(hosts),
            name=str(top.get("name", path.stem if path else "lab")),
            host_suffix=str(top.get("host_suffix", "")),
            controller_key=keypath(top.get("controller_key"), "controller_key"),
            insecure=insecure,
            path=path,
            testbed=dict(testbed),
        )

    @classmethod
    def of(
        cls,
        *,
        name: str = "lab",
        host_suffix: str = "",
        controller_key: str | Path | None = None,
        insecure: bool = False,
        base_dir: str | Path | None = None,
        **hosts: str | Mapping[str, Any],
    ) -> "Lab":
        """Keyword form for notebooks: ``Lab.of(h1="10.0.0.1", h2={"control": ..., ...})``."""
        table = {n: ({"control": v} if isinstance(v, str) else dict(v)) for n, v in hosts.items()}
        top: dict[str, Any] = {"name": name, "host_suffix": host_suffix, "insecure": insecure}
        if controller_key is not None:
            top["controller_key"] = str(controller_key)
        return cls.from_dict({"lab": top, "hosts": table}, base_dir=base_dir)

    @classmethod
    def loopback(cls, n: int, *, base_port: int = 12870, names: list[str] | None = None) -> "Lab":
        """``n`` insecure agents on 127.0.0.1, ports base_port, base_port+1, ... (tests)."""
        names = names or [f"h{i + 1}" for i in range(n)]
        if len(names) != n:
            raise LabError(f"loopback lab: {n} hosts but {len(names)} names")
        hosts = tuple(
            LabHost(name=nm, control="127.0.0.1", port=base_port + i) for i, nm in enumerate(names)
        )
        return cls(hosts=hosts, name=f"loopback{n}", insecure=True)

    def to_toml(self) -> str:
        """The lab as lab-file text (key paths absolute), written as the testbed writes its own."""
        hosts = tuple(
            FileHost(h.name, h.control, h.port, h.test, str(h.public_key or ""), "" if h.role == "host" else h.role,
                     h.shape.agent if h.shape else "", h.shape.dev if h.shape else "", h.dev)
            for h in self.hosts
        )
        return render_lab(LabFile(self.name, str(self.controller_key or ""), self.insecure, self.host_suffix, hosts,
                                  testbed=self.testbed))


def _suggest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


__all__ = ["DEFAULT_PORT", "Lab", "LabHost", "Shape", "is_loopback"]
