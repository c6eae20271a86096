"""``netesto plan`` as users run it: a real subprocess, text and JSON output, exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """\
SET server=h1
SET randDelay=0.5
BEGIN Pair
SET exp=COUNTER
DO_SERVER host=$server exp=$exp start=1
DO_CLIENT host=$client server=$server ca=$ca dur=$dur test=TCP_STREAM
RAND_WAIT $randDelay
WAIT $dur
GET_DATA host=$client
PROCESS_EXP
END Pair
RUN Pair client=h2 ca=cubic,bbr dur=$dur
"""


def run_plan(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    repo = Path(__file__).resolve().parents[2]
    env_path = str(repo)
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = env_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run(
        [sys.executable, "-m", "netesto", "plan", *args],
        cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60, env=env,
    )


def test_plan_text(tmp_path: Path) -> None:
    script = tmp_path / "two.nts"
    script.write_text(SCRIPT)
    (tmp_path / "counter").write_text("41\n")
    res = run_plan(str(script), "-D", "dur=5", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    # Files below the current directory are shown relative to it.
    assert lines[0] == "two.nts:5  h1  DO_SERVER exp=42 start=1"
    assert "two.nts:6  h2  DO_CLIENT exp=42 " in lines[1] and "ca=cubic" in lines[1]
    args = (str(script), "-D", "dur=5", "--counter", "41")
    elsewhere = run_plan(*args, cwd=tmp_path.parent).stdout.splitlines()
    assert elsewhere[0] == f"{script.relative_to(tmp_path.parent)}:5  h1  DO_SERVER exp=42 start=1"
    outside = tmp_path / "sub"
    outside.mkdir()
    assert run_plan(*args, cwd=outside).stdout.startswith(f"{script}:5  h1  DO_SERVER")
    assert any("DO_CLIENT exp=43" in ln and "ca=bbr" in ln for ln in lines)
    assert lines[-1].startswith("# 12 actions, estimated wall time 0:10 (10.5 s) of waits and flows; a run ")
    assert (tmp_path / "counter").read_text() == "41\n"  # planning never consumes counter values


def test_plan_lines_show_essentials_and_non_defaults(tmp_path: Path) -> None:
    res = run_plan("-", cwd=tmp_path, stdin=(
        "DO_CLIENT host=h2 server=h1 test=TCP_STREAM dur=3\n"
        "DO_CLIENT host=h2 server=h1 test=TCP_RR req=10K dur=3 instances=2 driver=iperf3\n"
        "RAND_WAIT 2\nSET_NETEM host=h1 delay=10\nDESC hi\nPROCESS_EXP\n"))
    assert res.returncode == 0, res.stderr
    lines = [ln.split("  ", 2)[2] for ln in res.stdout.splitlines()[:-1]]
    assert lines == [
        "DO_CLIENT exp=1 server=h1 ca=reno dur=3 instances=1 test=TCP_STREAM group=1",
        "DO_CLIENT exp=1 server=h1 ca=reno dur=3 instances=2 req=10K reply=1 test=TCP_RR group=2 driver=iperf3",
        "RAND_WAIT low=0 high=2",
        "SET_NETEM exp=1 delay=10",
        "PROCESS_EXP exp=1 desc=hi",
    ]
    full = json.loads(run_plan("-", "--json", cwd=tmp_path, stdin="DO_CLIENT host=h2 server=h1\n").stdout)
    # --json keeps every argument, defaults included.
    assert {"local_buffer", "remote_buffer", "pacing", "rate", "interval", "req_text", "stats"} <= set(full["actions"][0])


def test_plan_lines_say_who_closes_a_crr_flow_and_a_bad_closer_is_refused(tmp_path: Path) -> None:
    res = run_plan("-", cwd=tmp_path, stdin=(
        "DO_CLIENT host=h2 server=h1 test=TCP_CRR req=100 dur=3\n"
        "DO_CLIENT host=h2 server=h1 test=TCP_CRR req=100 dur=3 crr_close=server\n"))
    assert res.returncode == 0, res.stderr
    lines = [ln.split("  ", 2)[2] for ln in res.stdout.splitlines()[:-1]]
    assert lines == [
        "DO_CLIENT exp=1 server=h1 ca=reno dur=3 instances=1 req=100 reply=1 test=TCP_CRR group=1 crr_close=rst",
        "DO_CLIENT exp=1 server=h1 ca=reno dur=3 instances=1 req=100 reply=1 test=TCP_CRR group=2 crr_close=server",
    ]
    full = json.loads(run_plan("-", "--json", cwd=tmp_path, stdin="DO_CLIENT host=h2 server=h1\n").stdout)
    assert full["actions"][0]["crr_close"] == "rst"
    bad = run_plan("-", cwd=tmp_path, stdin="SET c=fin\nDO_CLIENT host=a server=b test=TCP_CRR crr_close=$c\n")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "<stdin>:2:40: error: DO_CLIENT: unknown crr_close 'fin'" in bad.stderr, bad.stderr
    assert "rst, client, server" in bad.stderr and "Traceback" not in bad.stderr


def test_plan_json_and_counter_option(tmp_path: Path) -> None:
    script = tmp_path / "two.nts"
    script.write_text(SCRIPT)
    res = run_plan(str(script), "-D", "dur=5", "--json", "--counter", "7", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["estimate_s"] == 10.5
    kinds = [a["action"] for a in data["actions"]]
    assert kinds.count("DO_CLIENT") == 2 and kinds.count("PROCESS_EXP") == 2
    assert [a["exp"] for a in data["actions"] if a["action"] == "PROCESS_EXP"] == [8, 9]
    assert data["actions"][1]["loc"] == f"{script}:6"


def test_plan_workdir_counter(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "counter").write_text("99\n")
    res = run_plan("-", "--workdir", str(work), "--json", cwd=tmp_path,
                   stdin="DO_SERVER host=a exp=COUNTER\n")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["actions"][0]["exp"] == 100


def test_plan_error_exit_2(tmp_path: Path) -> None:
    res = run_plan("-", cwd=tmp_path, stdin="SET a=1\nDO_CLIENT host=a server=b durr=3\n")
    assert res.returncode == 2
    assert res.stdout == ""
    assert "<stdin>:2:27: error: DO_CLIENT: unknown argument 'durr'" in res.stderr
    assert "did you mean dur" in res.stderr
    assert "Traceback" not in res.stderr


def test_plan_missing_file_and_bad_define(tmp_path: Path) -> None:
    res = run_plan(str(tmp_path / "nope.nts"), cwd=tmp_path)
    assert res.returncode == 2 and "not found" in res.stderr
    res = run_plan("-", "-D", "novalue", cwd=tmp_path, stdin="WAIT 1\n")
    assert res.returncode == 2 and "VAR=VALUE" in res.stderr


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    # `netesto plan big.nts | head -1` used to end in a BrokenPipeError traceback.
    script = tmp_path / "big.nts"
    script.write_text("FOR i IN 1..20000 DO\nECHO line $i of a long plan\nDONE\n")
    repo = Path(__file__).resolve().parents[2]
    import os

    env = dict(os.environ, PYTHONPATH=str(repo))
    for extra in ([], ["--json"]):
        proc = subprocess.Popen([sys.executable, "-m", "netesto", "plan", str(script), *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # the reader goes away after one line
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141
        assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_plan_finds_source_files_where_run_does(tmp_path: Path) -> None:
    # `netesto run s.nts --workdir W` finds SOURCE files in W; `netesto plan s.nts
    # --workdir W` used to report them as not found.
    work = tmp_path / "w"
    work.mkdir()
    (work / "counter").write_text("7\n")
    (work / "settings.nts").write_text("SET dur=4\n")
    script = tmp_path / "s.nts"
    script.write_text("SOURCE settings.nts\nDO_CLIENT host=h1 server=h2 dur=$dur\n")
    res = run_plan(str(script), "--workdir", str(work), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "DO_CLIENT exp=8 server=h2 ca=reno dur=4 " in res.stdout


def test_a_define_wins_over_the_scripts_own_set(tmp_path) -> None:
    # `netesto plan -D dur=5` was silently overridden by the script's `SET dur=20`.
    from netesto.script import plan

    text = "SET dur=20\nSET_EXP half=$dur/2\nDO_CLIENT host=a server=b dur=$dur exp=1\nWAIT $half\n"
    client, wait = plan(text, defines={"dur": "5"})
    assert client.dur == 5.0 and wait.seconds == 2  # SET_EXP is integer arithmetic
    client, wait = plan(text)
    assert client.dur == 20.0 and wait.seconds == 10.0
