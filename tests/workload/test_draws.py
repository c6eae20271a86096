"""A flow's draws: the same seed gives the same sizes and gaps, another seed others, and each family's
draws have its mean (within a tolerance the sample size sets)."""

from __future__ import annotations

import math
import random
import statistics
import subprocess
import sys

import pytest

from netesto.workload import SIZE, TIME, Workload, generator, parse, poisson_gap, seed_of

N = 20_000  # draws per distribution
Z = 5.0  # tolerance in standard errors: a correct family fails this 1 time in ~1.7 million
# one distribution per family (finite variance, so the sample mean's error is sd / sqrt(N)), and truncated ones
SIZES = [
    "const(10K)",
    "uniform(min=1K,max=64K)",
    "exp(mean=10K)",
    "exp(mean=10K,max=20K)",
    "normal(mean=10K,sd=4K)",
    "normal(mean=2K,sd=4K)",  # truncated at 0: its mean is well above 2K
    "lognormal(mean=10K,sigma=1)",
    "lognormal(mean=10K,sigma=1.5,max=200K)",
    "pareto(min=1K,shape=2.5)",
    "pareto(mean=10K,shape=1.2,max=1M)",  # heavy tailed, bounded
    "weibull(scale=10K,shape=1.5)",
    "weibull(mean=10K,shape=0.7,max=100K)",
    "cdf(websearch,scale=0.01)",
    "cdf(datamining,scale=0.001)",
]
GAPS = ["exp(mean=2ms)", "uniform(1ms,3ms)", "normal(mean=5ms,sd=1ms)", "weibull(scale=1ms,shape=2)", "5ms"]


def draws(req: str, gap: str = "", seed: int = 7, stream: int = 0, n: int = 200) -> list[tuple[int, int, float]]:
    return Workload.of(req, "exp(mean=3K)", gap, seed, stream).draws().take(n)


def test_the_same_seed_draws_the_same_sizes_and_gaps_twice() -> None:
    for req in SIZES:
        assert draws(req, "exp(mean=2ms)") == draws(req, "exp(mean=2ms)"), req


def test_another_seed_or_stream_draws_others() -> None:
    for req in SIZES[1:]:
        first = draws(req, "exp(mean=2ms)")
        assert [d[0] for d in first] != [d[0] for d in draws(req, "exp(mean=2ms)", seed=8)], req
        assert [d[0] for d in first] != [d[0] for d in draws(req, "exp(mean=2ms)", stream=1)], req
    gaps = [d[2] for d in draws("10K", "exp(mean=2ms)")]
    assert gaps != [d[2] for d in draws("10K", "exp(mean=2ms)", seed=8)]


def test_a_quantitys_draws_do_not_move_when_another_ones_distribution_does() -> None:
    a = draws("lognormal(mean=10K,sigma=1)", "exp(mean=2ms)")
    b = draws("lognormal(mean=10K,sigma=1)", "uniform(1ms,9ms)")
    assert [d[0] for d in a] == [d[0] for d in b] and [d[2] for d in a] != [d[2] for d in b]


def test_the_draws_are_the_documented_function_of_the_documented_stream() -> None:
    """Draw i is the distribution's quantile of the i-th random() of Random("netesto/<seed>/<stream>/<quantity>"):
    anyone can derive them (Python guarantees that sequence across versions and machines)."""
    w = Workload.of("exp(mean=10K)", "", "exp(mean=2ms)", 42, 3)
    got = w.draws(reply=100).take(5)
    r_req, r_gap = random.Random("netesto/42/3/req"), random.Random("netesto/42/3/gap")
    for req, reply, gap in got:
        assert req == max(1, math.floor(-10240 * math.log1p(-r_req.random()) + 0.5))
        assert gap == pytest.approx(-0.002 * math.log1p(-r_gap.random()), rel=1e-12)
        assert reply == 100
    assert generator(42, 3, "req").random() == random.Random("netesto/42/3/req").random()


def test_draws_are_the_same_in_another_process() -> None:
    code = ("from netesto.workload import Workload; "
            "print(Workload.of('cdf(websearch,scale=0.01)', 'lognormal(mean=5K,sigma=1)', 'exp(mean=3ms)', 9, 2)"
            ".draws().take(50))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    here = Workload.of("cdf(websearch,scale=0.01)", "lognormal(mean=5K,sigma=1)", "exp(mean=3ms)", 9, 2).draws()
    assert out.strip() == repr(here.take(50))


@pytest.mark.parametrize("text", SIZES)
def test_size_draws_have_the_distributions_mean(text: str) -> None:
    dist = parse(text, SIZE)
    values = [d[0] for d in Workload.of(text, "", "", 1, 0).draws().take(N)]
    mean = statistics.fmean(values)
    # whole bytes (rounded half up, at least 1) move the mean by at most a byte
    assert abs(mean - dist.mean) <= Z * dist.sd / math.sqrt(N) + 1.0, (mean, dist.mean, dist.sd)
    if dist.sd > 0:
        assert statistics.pstdev(values) == pytest.approx(dist.sd, rel=0.25)  # a looser check of the spread


@pytest.mark.parametrize("text", GAPS)
def test_gap_draws_have_the_distributions_mean(text: str) -> None:
    dist = parse(text, TIME)
    values = [d[2] for d in Workload.of("1K", "", text, 1, 0).draws().take(N)]
    assert abs(statistics.fmean(values) - dist.mean) <= Z * dist.sd / math.sqrt(N) + 1e-12, (text, dist.mean)


def test_truncated_means_agree_with_the_numeric_integral() -> None:
    """The closed forms of truncated families against the midpoint rule over their quantiles."""
    from netesto.workload.families import numeric_moments

    for text in ("exp(mean=10K,max=20K)", "normal(mean=2K,sd=4K)", "lognormal(mean=10K,sigma=1.5,max=200K)",
                 "pareto(mean=10K,shape=1.2,max=1M)"):
        d = parse(text, SIZE)
        mean, var = numeric_moments(d.quantile, 0.0, 1.0)
        assert mean == pytest.approx(d.mean, rel=2e-3), text
        assert math.sqrt(var) == pytest.approx(d.sd, rel=2e-2), text


def test_poisson_arrivals_put_the_load_on_the_link() -> None:
    gap = parse(poisson_gap(17112.5, 0.5, 30_000_000, instances=2), TIME)
    per_second = 2 / gap.mean  # both instances
    assert per_second * 17112.5 * 8 == pytest.approx(0.5 * 30e6, rel=1e-6)


def test_a_run_seed_gives_each_group_its_own_seed() -> None:
    assert seed_of(1, 1, 1) == seed_of(1, 1, 1)
    assert len({seed_of(1, 1, g) for g in range(1, 50)} | {seed_of(2, 1, 1)}) == 50
