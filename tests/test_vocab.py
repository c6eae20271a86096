"""The shared vocabulary: one parser each for sizes, rates and times, as every caller sees it."""

from __future__ import annotations

import doctest

import pytest

from netesto import vocab
from netesto.commands import flow
from netesto.errors import ScriptError, UsageError
from netesto.script import plan
from netesto.script.actions import DoClient, SetNetem
from netesto.script.validate import to_size
from netesto.testbed import shaping


def test_doctests() -> None:
    result = doctest.testmod(vocab)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize(
    "text, expected",
    [("1", 1), ("10K", 10240), ("1M", 1048576), ("2G", 2 * 2**30), ("10k", 10000), ("1m", 10**6),
     ("1.5K", 1536), ("64KB", 65536), (" 64k ", 64000), (7, 7), ("0", 0), (str(2**40), 2**40)],
)
def test_sizes(text: str | int, expected: int) -> None:
    assert vocab.parse_size(text) == expected


@pytest.mark.parametrize("text, message", [
    ("", "expected a size like 100, 10K or 1M"), ("K", "expected a size"), ("1X", "expected a size"),
    ("-1", "expected a size"), ("1 M B", "expected a size"), ("1T", "expected a size"),
    (str(2**40 + 1), "0..1099511627776 bytes"), ("9" * 400, "0..1099511627776 bytes"), (-1, "0..1099511627776"),
])
def test_bad_sizes(text: str | int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        vocab.parse_size(text)


@pytest.mark.parametrize(
    "text, expected",
    [("100M", 10**8), ("100mbit", 10**8), ("100Mbit/s", 10**8), ("2.5g", 25 * 10**8), ("500k", 500_000),
     ("1T", 10**12), ("100 mbit", 10**8), ("10MBps", 8 * 10**7), ("1000b", 1000), ("0", 0), (5000, 5000)],
)
def test_rates(text: str | int, expected: int) -> None:
    assert vocab.parse_rate(text) == expected


@pytest.mark.parametrize("text, message", [
    ("fast", "expected a rate in bits/s"), ("-5mbit", "expected a rate"), ("100 mbits/s", "expected a rate"),
    ("1e6", "expected a rate"), ("10001G", r"0..1e\+13 bits/s"), ("9" * 400, r"0..1e\+13"),
])
def test_bad_rates(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        vocab.parse_rate(text)


@pytest.mark.parametrize("text, expected", [("20ms", 20.0), ("0.1s", 100.0), ("500us", 0.5), ("3", 3.0),
                                            (" 40 ms ", 40.0), (0, 0.0), (2.5, 2.5)])
def test_times(text: str | float, expected: float) -> None:
    assert vocab.parse_time_ms(text) == expected


@pytest.mark.parametrize("text, message", [("soon", "expected a time like 20ms"), ("20MS", "expected a time"),
                                           ("-1ms", "expected a time"), (-1.0, ">= 0"), (float("nan"), ">= 0")])
def test_bad_times(text: str | float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        vocab.parse_time_ms(text)


def test_the_script_and_the_testbed_read_rates_alike() -> None:
    # The same words give the same bits/s in a script's pacing and a testbed's bw.
    for text in ("100M", "100mbit", "2.5g", "10MBps", "1000b"):
        (client,) = plan(f"DO_CLIENT host=c server=s exp=1 pacing={text}")
        (netem,) = plan(f"SET_NETEM host=c exp=1 netem_delay=1 rate={text}")
        assert isinstance(client, DoClient) and isinstance(netem, SetNetem)
        assert client.pacing == netem.rate == shaping.parse_rate(text) == vocab.parse_rate(text)


def test_zero_is_none_in_a_script_but_no_rate_for_a_testbed() -> None:
    (client,) = plan("DO_CLIENT host=c server=s exp=1 pacing=0")
    assert isinstance(client, DoClient) and client.pacing == 0
    with pytest.raises(UsageError, match="bad rate '0': must be > 0"):
        shaping.parse_rate("0")


def test_each_caller_names_what_was_bad_and_where() -> None:
    with pytest.raises(ScriptError) as err:
        plan("DO_CLIENT host=c server=s exp=1 pacing=fast", file="t.nts")
    assert err.value.message == ("DO_CLIENT: bad pacing: expected a rate in bits/s like 100M, 100mbit "
                                 "or 1gbit, got 'fast'")
    assert (err.value.line, err.value.column) == (1, 33)
    with pytest.raises(ScriptError) as err:
        plan("DO_CLIENT host=c server=s exp=1 req=4096G", file="t.nts")
    assert err.value.message == "DO_CLIENT: bad req: a size must be in 0..1099511627776 bytes, got '4096G'"
    with pytest.raises(UsageError, match=r"^bad rate 'fast': expected a rate in bits/s like 100M"):
        shaping.parse_rate("fast")
    with pytest.raises(UsageError, match=r"^bad time 'soon': expected a time like 20ms, 0.1s or 500us$"):
        shaping.parse_time_ms("soon")
    with pytest.raises(UsageError, match=r"^--req: expected a size like 100, 10K or 1M, got '1Q'$"):
        flow._value("1Q", "req", to_size)
