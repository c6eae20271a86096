"""Lab parsing, validation, HOST_SUFFIX resolution and errors."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import netesto.labfile as labfile
from netesto.controller.lab import Lab, LabHost, Shape
from netesto.errors import LabError

LAB_TOML = """
[lab]
name = "tb1"
host_suffix = "mynet"
controller_key = "keys/controller.key_secret"
insecure = false

[hosts.h1]
control = "10.77.0.1"
port = 12871
test = "10.78.1.1"
public_key = "keys/h1.key"
shape = { agent = "router", dev = "r-h1" }

[hosts.h2]
control = "10.77.0.2"
public_key = "keys/h2.key"

[hosts.router]
control = "10.77.0.254"
role = "router"
public_key = "keys/router.key"
"""


def write_lab(tmp_path: Path, text: str = LAB_TOML, keys=("controller.key_secret", "h1.key", "h2.key", "router.key")) -> Path:
    (tmp_path / "keys").mkdir(exist_ok=True)
    for k in keys:
        (tmp_path / "keys" / k).write_text("x")
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return path


def test_lab_file_parses_with_relative_keys(tmp_path: Path) -> None:
    lab = Lab.from_file(write_lab(tmp_path))
    assert lab.name == "tb1" and lab.host_suffix == "mynet" and not lab.insecure
    assert lab.names == ["h1", "h2", "router"]
    h1 = lab.resolve("h1")
    assert h1.port == 12871 and h1.control == "10.77.0.1" and h1.test_address == "10.78.1.1"
    assert h1.public_key == tmp_path.resolve() / "keys" / "h1.key"
    assert h1.shape == Shape(agent="router", dev="r-h1")
    h2 = lab.resolve("h2")
    assert h2.port == 12870 and h2.test_address == "10.77.0.2" and h2.role == "host"
    assert lab.resolve("router").role == "router"
    assert lab.controller_key == tmp_path.resolve() / "keys" / "controller.key_secret"


def test_host_suffix_and_domains_resolve(tmp_path: Path) -> None:
    lab = Lab.from_file(write_lab(tmp_path))
    assert lab.resolve("h1.mynet").name == "h1"
    assert lab.resolve("h2.mynetwork.com").name == "h2"  # the original's default suffix
    assert lab.resolve("10.78.1.1").name == "h1"  # by test address
    assert "h1.mynet" in lab and "h9" not in lab


def test_unknown_host_names_it_lists_hosts_and_suggests(tmp_path: Path) -> None:
    lab = Lab.from_file(write_lab(tmp_path))
    with pytest.raises(LabError) as info:
        lab.resolve("hh1.mynet")
    msg = str(info.value)
    assert "'hh1.mynet'" in msg and "h1, h2, router" in msg and "did you mean 'h1'" in msg


def test_missing_key_file_is_named(tmp_path: Path) -> None:
    path = write_lab(tmp_path, keys=("controller.key_secret", "h1.key", "router.key"))
    with pytest.raises(LabError, match=r"h2.*h2\.key not found"):
        Lab.from_file(path)


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="not found"):
        Lab.from_file(tmp_path / "nope.toml")
    p = tmp_path / "bad.toml"
    p.write_text("[lab\n")
    with pytest.raises(LabError, match="bad TOML"):
        Lab.from_file(p)
    with pytest.raises(LabError, match=r"unknown key\(s\) contrl"):
        Lab.from_dict({"lab": {"insecure": True}, "hosts": {"h1": {"contrl": "127.0.0.1"}}})
    with pytest.raises(LabError, match="'control'"):
        Lab.from_dict({"lab": {"insecure": True}, "hosts": {"h1": {"port": 1}}})
    with pytest.raises(LabError, match="bad port"):
        Lab.from_dict({"lab": {"insecure": True}, "hosts": {"h1": {"control": "127.0.0.1", "port": 70000}}})
    with pytest.raises(LabError, match="shape agent 'routr'.*did you mean 'router'"):
        Lab.from_dict(
            {
                "lab": {"insecure": True},
                "hosts": {
                    "h1": {"control": "127.0.0.1", "shape": {"agent": "routr", "dev": "x"}},
                    "router": {"control": "127.0.0.2"},
                },
            }
        )
    with pytest.raises(LabError, match="controller_key missing"):
        Lab.from_dict({"hosts": {"h1": {"control": "10.0.0.1"}}})
    with pytest.raises(LabError, match="only on loopback.*h1"):
        Lab.from_dict({"lab": {"insecure": True}, "hosts": {"h1": {"control": "10.0.0.1"}}})
    with pytest.raises(LabError, match="duplicate"):
        Lab(hosts=(LabHost("a", "127.0.0.1"), LabHost("a", "127.0.0.1")), insecure=True)


def test_keyword_and_loopback_labs_round_trip(tmp_path: Path) -> None:
    lab = Lab.of(h1="127.0.0.1", h2={"control": "127.0.0.1", "port": 13000}, insecure=True)
    assert lab.resolve("h2").port == 13000 and lab.resolve("h1").port == 12870
    lb = Lab.loopback(3, base_port=20000)
    assert [(h.name, h.port) for h in lb] == [("h1", 20000), ("h2", 20001), ("h3", 20002)]
    path = tmp_path / "lb.toml"
    path.write_text(lb.to_toml())
    assert Lab.from_file(path) == lb


def test_reads_the_lab_file_the_testbed_writes(tmp_path: Path) -> None:
    from netesto.labfile import LabFile, LabHost as TbHost, write_lab

    keys = tmp_path / "keys"
    keys.mkdir()
    for k in ("controller.key_secret", "h1.key", "router.key"):
        (keys / k).write_text("x")
    path = write_lab(tmp_path / "lab.toml", LabFile(
        "tb", "keys/controller.key_secret", hosts=(
            TbHost("h1", "10.1.1.1", port=12871, test="10.2.1.1", public_key="keys/h1.key",
                   shape_agent="router", shape_dev="r-h1", dev="eth0"),
            TbHost("router", "10.1.1.254", public_key="keys/router.key", role="router"),
        )))
    lab = Lab.from_file(path)
    h1 = lab.resolve("h1")
    assert (h1.port, h1.test_address, h1.dev, h1.shape) == (12871, "10.2.1.1", "eth0", Shape("router", "r-h1"))
    assert lab.resolve("router").role == "router"


def test_importing_the_controller_is_light() -> None:
    import subprocess
    import sys

    code = "import sys, netesto.controller; print(' '.join(sorted(sys.modules)))"
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    for heavy in ("zmq", "xarray", "numpy", "IPython", "bokeh"):
        assert heavy not in mods, heavy


def test_exports() -> None:
    import netesto.controller as c

    assert c.__all__ == sorted(c.__all__, key=str.lower) or c.__all__ == sorted(c.__all__)
    for name in c.__all__:
        assert hasattr(c, name), name


def test_to_toml_escapes_and_round_trips_every_field(tmp_path: Path) -> None:
    """One writer for lab files (the testbed's): quotes and backslashes in paths survive."""
    odd = tmp_path / 'we"ird\\dir'
    odd.mkdir()
    for n in ("controller.key_secret", "h1.key", "r.key"):
        (odd / n).write_text("x")
    lab = Lab.of(
        h1={"control": "10.0.0.1", "test": "10.1.0.1", "port": 13001, "public_key": str(odd / "h1.key"),
            "shape": {"agent": "r", "dev": "r-h1"}, "dev": "eth0"},
        r={"control": "10.0.0.254", "role": "router", "public_key": str(odd / "r.key")},
        controller_key=odd / "controller.key_secret", host_suffix=".lab", name="odd",
    )
    path = tmp_path / "odd.toml"
    path.write_text(lab.to_toml())
    back = Lab.from_file(path)
    assert back.hosts == lab.hosts and back.controller_key == lab.controller_key
    assert (back.name, back.host_suffix, back.insecure) == ("odd", ".lab", False)


@pytest.mark.parametrize("hosts", [
    {"h1": {"control": "127.0.0.1", "dev": "eth0; rm"}},
    {"h1": {"control": "127.0.0.1", "dev": "a-very-long-interface-name"}},
    {"h1": {"control": "127.0.0.1", "shape": {"agent": "r", "dev": "r h1"}},
     "r": {"control": "127.0.0.2", "role": "router"}},
])
def test_a_bad_device_name_is_refused_when_the_lab_is_read(hosts: dict) -> None:
    # The agent refuses such names only when SET_QDISC/SET_NETEM/DO_TCPDUMP reaches it,
    # i.e. in the middle of a run; the lab is checked before anything runs.
    with pytest.raises(LabError, match="bad device name"):
        Lab.from_dict({"lab": {"name": "x", "insecure": True}, "hosts": hosts})
    ok = {"h1": {"control": "127.0.0.1", "dev": "veth0.10@x"}}
    assert Lab.from_dict({"lab": {"name": "x", "insecure": True}, "hosts": ok}).resolve("h1").dev == "veth0.10@x"


def test_hosts_whose_files_would_have_the_same_names_are_refused() -> None:
    # Data files are named by short host names (flows web-web-1-0, stats 0/web.*): two
    # hosts web.dc1 and web.dc2 wrote over each other's files in <exp>/.
    hosts = {"web.dc1": {"control": "127.0.0.1"}, "web.dc2": {"control": "127.0.0.2"}}
    with pytest.raises(LabError, match="web.dc1 and web.dc2 .*'web'"):
        Lab.from_dict({"lab": {"name": "x", "insecure": True}, "hosts": hosts})
    hosts = {"web.dc1": {"control": "127.0.0.1"}, "db.dc1": {"control": "127.0.0.2"}}
    assert Lab.from_dict({"lab": {"name": "x", "insecure": True}, "hosts": hosts}).resolve("web.dc1").short == "web"


def test_lab_file_reads_back_with_the_controller(tmp_path) -> None:
    keys = tmp_path / "tb.keys"
    keys.mkdir()
    for n in ("controller.key_secret", "h1.key", "router.key"):
        (keys / n).write_text("x")
    text = labfile.LabFile(
        "tb",
        "tb.keys/controller.key_secret",
        hosts=(
            labfile.LabHost("h1", "10.150.1.1", public_key="tb.keys/h1.key", shape_agent="router", shape_dev="r-h1", dev="eth0"),
            labfile.LabHost("router", "10.150.0.254", public_key="tb.keys/router.key", role="router"),
        ),
        comments=("a comment",),
    )
    path = labfile.write_lab(tmp_path / "tb.lab.toml", text)
    parsed = Lab.from_file(path)
    h1 = parsed.host("h1")
    assert h1.test_address == "10.150.1.1" and h1.shape.agent == "router" and h1.shape.dev == "r-h1"
    assert parsed.host("router").role == "router"
    assert parsed.controller_key == keys / "controller.key_secret"


def test_a_testbed_lab_file_carries_its_bottleneck(tmp_path) -> None:
    from netesto.labfile import LabFile, LabHost, update_testbed, write_lab

    shape = {"name": "tb", "mode": "netns", "bw": 20_000_000, "rtt": 40.0, "buffer": 100_000, "loss": 0.0,
             "jitter": 0.0}
    path = write_lab(tmp_path / "tb.lab.toml", LabFile("tb", insecure=True, hosts=(LabHost("h1", "127.0.0.1"),),
                                                       testbed=shape))
    lab = Lab.from_file(path)
    assert lab.testbed == shape
    assert Lab.from_dict(tomllib.loads(lab.to_toml())).testbed == shape  # written back as read
    update_testbed(path, {**shape, "bw": 50_000_000})
    assert Lab.from_file(path).testbed["bw"] == 50_000_000 and Lab.from_file(path).host("h1").control == "127.0.0.1"
    path.write_text(path.read_text().replace("jitter = 0.0", "bandwidth = 1"))
    with pytest.raises(LabError, match=r"\[testbed\]: unknown key\(s\) bandwidth"):
        Lab.from_file(path)
