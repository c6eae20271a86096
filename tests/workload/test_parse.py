"""Distributions as scripts write them: their canonical text, their refusals, and empirical CDFs' checks."""

from __future__ import annotations

import doctest
import math

import pytest

from netesto.workload import SIZE, TIME, DistError, parse
from netesto.workload import cdf, dists, draws


def test_doctests() -> None:
    for module in (dists, draws):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("text, canonical", [
    ("exp(10K)", "exp(mean=10240)"),
    ("exponential(mean=10k)", "exp(mean=10000)"),
    ("lognormal(10K,1)", "lognormal(mean=10240,sigma=1)"),
    ("normal(mean=1M,sd=100K,min=0)", "normal(mean=1048576,sd=102400)"),
    ("uniform(1K, 2K)", "uniform(min=1024,max=2048)"),
    ("pareto(mean=10K,shape=1.5)", "pareto(min=3413,shape=1.5)"),
    ("weibull(scale=1K,shape=0.5)", "weibull(scale=1024,shape=0.5)"),
    ("const(value=64)", "const(value=64)"),
    ("64", "const(value=64)"),
    ("cdf(points=0:0;1K:0.5;4K:1)", "cdf(points=0:0;1024:0.5;4096:1)"),
])
def test_canonical_text_parses_back_to_the_same(text: str, canonical: str) -> None:
    d = parse(text, SIZE)
    assert d.text == canonical
    assert parse(d.text, SIZE) == d


def test_times_take_the_languages_units() -> None:
    assert parse("exp(mean=5ms)", TIME).mean == pytest.approx(0.005)
    assert parse("exp(500us)", TIME).mean == pytest.approx(0.0005)
    assert parse("uniform(1,3)", TIME).mean == pytest.approx(0.002)  # a bare time is ms
    assert parse("exp(mean=0.00001ms)", TIME).text == "exp(mean=0.00001ms)"  # fixed point: no exponent


def test_packaged_cdfs_are_the_published_shapes_and_scale() -> None:
    web = parse("cdf(websearch)", SIZE)
    assert web.points[0] == (0, 0) and web.points[-1] == (30_000_000, 1.0) and len(web.points) == 12
    assert parse("cdf(websearch,scale=0.01)", SIZE).mean == pytest.approx(web.mean / 100)
    mining = parse("cdf(datamining)", SIZE)
    assert mining.points[-1] == (1e9, 1.0) and mining.quantile(0.5) == pytest.approx(1100)
    assert parse("cdf(websearch,scale=0.01)", SIZE).short == "cdf(websearch,scale=0.01)"


@pytest.mark.parametrize("text, message, hint", [
    ("lognormal", "lognormal needs its parameters", "lognormal(mean=10K,sigma=1)"),
    ("lognormal()", "lognormal needs mean=, sigma=", "e.g."),
    ("lognormal(mean=10K)", "lognormal needs sigma=", "e.g."),
    ("lognorm(mean=10K,sigma=1)", "unknown distribution 'lognorm'", "did you mean lognormal"),
    ("weibul(1K,2)", "unknown distribution", "did you mean weibull"),
    ("exp:10K", "written name(value)", "did you mean exp(10K)"),
    ("exp(mean=10K", "no closing", ""),
    ("exp(sd=1K)", "exp has no parameter 'sd'", ""),
    ("exp(1K,2K)", "too many values", ""),
    ("exp(mean=lots)", "exp mean: expected a size", ""),
    ("normal(mean=1K,sd=0)", "sd must be above 0", ""),
    ("uniform(2K,1K)", "max 1024 is below min 2048", ""),
    ("pareto(min=1K,shape=0.9)", "no mean", "max="),
    ("exp(mean=2G)", "above 1 GiB", ""),
    ("websearch", "neither a size nor a distribution", "did you mean cdf(websearch)"),
    ("cdf(websearc)", "no packaged CDF named 'websearc'", "did you mean websearch"),
    ("cdf()", "cdf needs one of", ""),
    ("cdf(websearch,scale=0)", "scale must be above 0", ""),
    ("normal(mean=1K,sd=1,min=100K)", "no probability between", ""),
])
def test_bad_distributions_are_refused_saying_what_and_what_might_be_meant(text: str, message: str,
                                                                          hint: str) -> None:
    with pytest.raises(DistError) as info:
        parse(text, SIZE)
    assert message in str(info.value)
    assert hint in info.value.hint


def test_a_cdf_is_for_sizes() -> None:
    with pytest.raises(DistError, match="draws sizes"):
        parse("cdf(websearch)", TIME)


def _file(text: str):
    return lambda name: (name, text)


@pytest.mark.parametrize("text, message", [
    ("0 0\n100 0.5\n50 1\n", "sizes.cdf:3: value 50 after 100"),
    ("0 0\n100 0.5\n200 0.4\n300 1\n", "sizes.cdf:3: probability 0.4 after 0.5"),
    ("0 0\n100 0.5\n200 0.9\n", "sizes.cdf:3: the last probability is 0.9, not 1"),
    ("0 0\n100 50\n200 100\n", "not in 0..1 (percentages?"),
    ("# nothing\n", "no points"),
    ("0 0\n100 half\n", "sizes.cdf:2: expected a number, got 'half'"),
    ("0 0 0 0\n", "sizes.cdf:1: expected 'value probability'"),
    ("-5 0\n100 1\n", "negative"),
])
def test_a_cdf_file_that_is_not_a_cdf_is_refused_at_its_line(text: str, message: str) -> None:
    with pytest.raises(DistError) as info:
        parse("cdf(file=sizes.cdf)", SIZE, read_file=_file(text))
    assert message in str(info.value)


def test_a_cdf_file_in_the_formats_people_have() -> None:
    """Two columns (blanks or a comma), or three (empirical-traffic-gen's value, index, probability); comments."""
    two = parse("cdf(file=a.cdf)", SIZE, read_file=_file("# sizes\n0, 0\n10K, 0.5  # half\n20K 1\n"))
    three = parse("cdf(file=b.cdf)", SIZE, read_file=_file("0 1 0\n10240 2 0.5\n20480 3 1\n"))
    assert two.points == three.points == ((0, 0), (10240, 0.5), (20480, 1.0))
    assert two.mean == pytest.approx(0.5 * 5120 + 0.5 * 15360)
    assert two.label == "a.cdf" and parse(two.text, SIZE) == two  # the points travel, the file does not


def test_a_cdf_with_a_point_mass_and_steps() -> None:
    d = parse("cdf(points=100:0.5;100:0.6;200:1)", SIZE)
    assert d.quantile(0.0) == d.quantile(0.55) == 100 and d.quantile(0.8) == pytest.approx(150)
    assert d.mean == pytest.approx(0.6 * 100 + 0.4 * 150)


def test_too_many_points_say_so() -> None:
    pts = ";".join(f"{i}:{i / 300:.6f}" for i in range(299)) + ";300:1"
    with pytest.raises(DistError, match=f"at most {cdf.MAX_POINTS}"):
        parse(f"cdf(points={pts})", SIZE)


def test_draws_of_whole_bytes_stay_in_range() -> None:
    d = parse("normal(mean=1,sd=1K)", SIZE)
    assert d.value(0.0) == 1 and d.value(0.999999) <= dists.MAX_SIZE
    assert parse("exp(mean=1G)", SIZE).value(1 - 1e-16) == dists.MAX_SIZE
    assert math.isfinite(parse("lognormal(mean=10K,sigma=3)", SIZE).value(1 - 2**-53))
