"""tcpdump captures: started per experiment, armed before the reply, stopped with their files flushed."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from netesto.agent.tc import check_dev
from netesto.errors import AgentError, PolicyError
from netesto.procs import parent_death_signal
from netesto.protocol.names import is_name
from netesto.protocol.replies import TcpdumpStartReply, TcpdumpStopReply

log = logging.getLogger("netesto.agent.control")
TCPDUMP_START_WAIT = 10.0  # seconds for tcpdump to say "listening on" (name lookups can be slow)


class Tcpdumps:
    """The captures of host ``host``; each one's stderr goes to a file in ``workdir``."""

    def __init__(self, workdir: Path, host: str) -> None:
        self.workdir = workdir
        self.host = host
        self.procs: dict[str, list[subprocess.Popen]] = {}
        self._pcaps: dict[int, Path] = {}  # tcpdump pid -> the pcap it writes

    def start(self, exp_dir: Path, exp: str, dev: str, server: str, packets: int) -> TcpdumpStartReply:
        """Capture on ``dev`` (of ``server`` only, unless "X") into ``exp_dir``; replies once it listens."""
        tool = shutil.which("tcpdump")
        if tool is None:
            raise AgentError("tcpdump is not installed on this host", kind="Unavailable")
        dev = check_dev(dev)
        server = server or "X"
        if not is_name(server, 253):  # a leading "-" would be read by tcpdump as an option
            raise PolicyError(f"bad tcpdump server {server!r}", kind="PolicyError")
        if not isinstance(packets, int) or not 1 <= packets <= 10**8:
            raise PolicyError(f"tcpdump packets={packets!r} is outside 1..100000000", kind="PolicyError")
        short = re.split(r"[^a-z0-9]", self.host.lower())[0] or "host"
        try:  # an address stays whole: its first label would give 10.0.0.2 and 10.0.0.3 one file
            label = str(ipaddress.ip_address(server)).replace(":", "_")
        except ValueError:
            label = re.split(r"[^A-Za-z0-9]", server)[0]  # a host name: its short name, as the original
        target = exp_dir / f"{short}-{label}.pcap"
        for other in self.procs.get(exp, []):
            if other.poll() is None and self._pcaps.get(other.pid) == target:
                raise AgentError(f"a tcpdump writing {target.name} in experiment {exp} is running (pid {other.pid}); "
                                 "stop it first", kind="Busy")
        # --immediate-mode -U: without them libpcap hands packets over in ~1 s blocks
        # and a stop right after the traffic loses the last of them.
        # -Z root: as root, tcpdump switches to its own user, which clears the parent-death
        # signal, so a killed agent left it capturing on. With -w it only copies packets (no
        # dissection). Without root (capabilities only) it switches to no one anyway.
        keep_user = ["-Z", "root"] if os.geteuid() == 0 else []
        argv = [tool, *keep_user, "-K", "-s", "128", "-c", str(packets), "--immediate-mode", "-U", "-i", dev]
        if server != "X":
            argv += ["host", server]
        argv += ["-w", str(target)]
        # stderr to a file (a pipe nobody reads could block tcpdump's exit report).
        errpath = self.workdir / f"tcpdump-{exp}-{target.stem}.stderr"
        with open(errpath, "wb") as errfile:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errfile,
                                    preexec_fn=parent_death_signal())
        # Reply only once the capture is armed ("listening on ..."): the flows start
        # right after this reply and their first packets belong in the pcap; and a
        # tcpdump that fails at once (unknown host, bad device) is reported, not hidden.
        deadline = time.monotonic() + TCPDUMP_START_WAIT
        while proc.poll() is None and time.monotonic() < deadline:
            if b"listening on" in errpath.read_bytes():
                break
            time.sleep(0.01)
        if proc.poll() is not None:
            text = " ".join(errpath.read_text(errors="replace").split())[-600:]
            raise AgentError(f"tcpdump on {dev} exited with status {proc.returncode} at start: {text or '(no output)'}",
                             kind="ToolError", detail={"argv": argv, "returncode": proc.returncode})
        if b"listening on" not in errpath.read_bytes():
            log.warning("tcpdump pid %d on %s: not listening after %.0f s; going on", proc.pid, dev,
                        TCPDUMP_START_WAIT)
        self._pcaps[proc.pid] = target
        self.procs.setdefault(exp, []).append(proc)
        return TcpdumpStartReply(proc.pid, target.name, argv)

    def running(self, exp: str) -> list[int]:
        """PIDs of ``exp``'s tcpdumps still capturing (their pcaps still grow)."""
        return [p.pid for p in self.procs.get(exp, []) if p.poll() is None]

    def stop(self, exp: str | None = None) -> TcpdumpStopReply:
        """Stop ``exp``'s captures (every one if None), each flushing its file; their pids."""
        stopped = []
        for key in list(self.procs):
            if exp is None or key == exp:
                for proc in self.procs.pop(key):
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGINT)  # tcpdump flushes its file on SIGINT
                        try:
                            proc.wait(timeout=3)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait()
                    stopped.append(proc.pid)
                    self._pcaps.pop(proc.pid, None)
        return TcpdumpStopReply(stopped)


__all__ = ["TCPDUMP_START_WAIT", "Tcpdumps"]
