"""The README's lab-host install, done: a wheel built from this tree, installed into a fresh venv.

There is no netesto on a package index: a lab host installs the wheel that
``pip wheel --no-deps -w dist .`` builds (with the engine's C loops compiled for this
python), which pulls in only pyzmq and msgpack. Its agent starts; a command that needs
an extra names the extra and this very wheel.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*argv: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)
    assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done


@pytest.mark.slow
def test_a_lab_host_installs_the_wheel_and_runs_the_agent(tmp_path: Path) -> None:
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", tmp_path / "dist",
        ROOT, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("netesto-*.whl")
    host = tmp_path / "host"
    run(sys.executable, "-m", "venv", host, cwd=tmp_path)
    run(host / "bin" / "pip", "install", "--disable-pip-version-check", "-q", wheel, cwd=tmp_path)
    listed = run(host / "bin" / "python", "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check",
                 cwd=tmp_path).stdout
    installed = {line.split("==")[0].lower() for line in listed.split()} - {"pip", "setuptools", "wheel"}
    assert installed == {"netesto", "pyzmq", "msgpack"}, listed
    if list((ROOT / "netesto" / "engine" / "native").glob("_fastloop*.so")):  # this tree's build compiled them: the wheel has them
        run(host / "bin" / "python", "-c", "import netesto.engine.native._fastloop, netesto.engine.native._rrloop", cwd=tmp_path)
    assert run(host / "bin" / "netesto-agent", "--version", cwd=tmp_path).stdout.startswith("netesto-agent ")

    ready = tmp_path / "port"
    agent = subprocess.Popen([host / "bin" / "netesto-agent", "--insecure", "--bind", "127.0.0.1", "--port", "0",
                              "--datadir", tmp_path / "data", "--ready-file", ready], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (ready.exists() and ready.read_text().strip()):
            assert agent.poll() is None and time.monotonic() < deadline, agent.communicate()[1]
            time.sleep(0.1)
        assert int(ready.read_text()) > 0
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=20)

    hint = subprocess.run([host / "bin" / "netesto", "sweep", "nb.ipynb", "-p", "ca=cubic"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert hint.returncode == 1 and "Traceback" not in hint.stderr, hint.stderr
    assert f"the 'sweep' extra has it: {host}/bin/python" in hint.stderr, hint.stderr
    assert f"-m pip install '{wheel}[sweep]'" in hint.stderr, hint.stderr
