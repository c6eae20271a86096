"""``python -m bench.ab BASE``: this checkout's engine against another's, each end run from its own tree, on real
veth pairs (the A/B a change to the engine is judged by)."""

from __future__ import annotations

import re
import subprocess

import pytest

from bench import ab


def test_the_sign_test_is_the_exact_two_sided_binomial_tail():
    assert ab.sign_test(5, 0) == pytest.approx(2 / 32)
    assert ab.sign_test(0, 10) == pytest.approx(2 / 1024)
    assert ab.sign_test(7, 3) == pytest.approx(2 * (1 + 10 + 45 + 120) / 1024)
    assert ab.sign_test(3, 3) == 1.0 and ab.sign_test(0, 0) == 1.0


def test_a_base_that_is_neither_a_checkout_nor_a_revision_is_named(tmp_path):
    with pytest.raises(SystemExit, match="'no-such-rev-x' is neither a checkout's directory nor a revision"):
        with ab.base_tree("no-such-rev-x"):
            pass
    with pytest.raises(SystemExit, match=f"with PYTHONPATH={tmp_path}, netesto comes from"):
        ab.check_tree(tmp_path)  # (no netesto there: the installed one is found instead)


def worktrees() -> str:
    return subprocess.run(["git", "-C", str(ab.REPO), "worktree", "list"], capture_output=True, text=True).stdout


def ratio(out: str) -> float:
    m = re.search(r"this / \S+: median (\d+\.\d+) \[", out)
    assert m, out
    return float(m.group(1))


@pytest.mark.netns
def test_the_tree_against_itself_reads_both_and_says_which_loops_ran(capsys):
    assert ab.main([str(ab.REPO), "--pairs", "1", "--dur", "1", "--flow", '{"test": "TCP_RR"}']) == 0
    out = capsys.readouterr().out
    assert "loops: this C, " in out and '"test": "TCP_RR"' in out and "(transactions/s)" in out
    assert 0.2 < ratio(out) < 5  # both ran and counted transactions (an A/A: level, give or take the host)


@pytest.mark.netns
def test_a_revision_is_checked_out_built_run_and_removed(capsys):
    if subprocess.run(["git", "-C", str(ab.REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    before = worktrees()
    assert ab.main(["HEAD", "--pairs", "1", "--dur", "1", "--flow", '{"test": "TCP_STREAM", "ca": "cubic"}']) == 0
    out = capsys.readouterr().out
    # its C loops were built in the worktree and ran there; the reading is the receiver's bits/s
    assert re.search(r"against HEAD \(\S*netesto-ab-\S*/tree\); loops: this C, HEAD C", out), out
    assert "(Gbit/s)" in out and ratio(out) > 0
    assert worktrees() == before  # the worktree is gone
