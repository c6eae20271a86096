"""The experiment book, and that every command of the language has exactly one builder."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError
from netesto.script import local, remote
from netesto.script.book import Book
from netesto.script.evaluator import Evaluator
from netesto.script.frame import Frame
from netesto.script.located import Args
from netesto.script.parser import SIMPLE_COMMANDS, Command, parse
from netesto.script.store import MemoryCounter

TOP = Frame(None, (), None)


def args(text: str) -> Args:
    (node,) = parse(text, "t.nts")
    assert isinstance(node, Command)
    return Args(Evaluator({}), node, TOP, None)


def test_exp_counter_prev_and_the_last_one() -> None:
    book = Book(MemoryCounter(start=4), "")
    assert book.exp(args("GET_DATA exp=COUNTER")) == 5  # the counter holds the last one used
    assert book.exp(args("GET_DATA")) == 5 and book.exp(args("GET_DATA exp=PREV")) == 5
    assert book.exp(args("GET_DATA exp=counter")) == 6 and book.exp(args("GET_DATA exp=9")) == 9
    assert Book(MemoryCounter(), "").exp(args("SET_NETEM"), consume=False) == 0


def test_prev_without_an_experiment_points_at_exp() -> None:
    with pytest.raises(ScriptError) as err:
        Book(MemoryCounter(), "").exp(args("GET_DATA host=h exp=PREV"))
    assert err.value.column == 17 and "no previous experiment" in err.value.message


def test_hosts_take_the_suffix_and_become_the_default() -> None:
    book = Book(MemoryCounter(), "lab.example")
    assert book.host(args("DO_SERVER host=h1")) == "h1.lab.example"
    assert book.host(args("DO_SERVER")) == "h1.lab.example"
    assert book.qualify("h2.other") == "h2.other" and book.qualify("10.0.0.1") == "10.0.0.1"
    with pytest.raises(ScriptError, match="DO_SERVER: host= is required"):
        Book(MemoryCounter(), "").host(args("DO_SERVER"))


def test_groups_count_per_experiment() -> None:
    book = Book(MemoryCounter(), "")
    assert [book.group(1), book.group(1), book.group(2), book.group(2)] == [1, 2, 1, 2]


def test_every_command_has_one_builder() -> None:
    built = list(local.BUILDERS) + list(remote.BUILDERS) + ["RUN", "SOURCE"]  # RUN/SOURCE run blocks
    assert sorted(built) == sorted(SIMPLE_COMMANDS)
    assert set(remote.ARGS) == set(remote.BUILDERS)
