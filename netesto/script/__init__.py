"""The Netesto script language: lexer, parser, interpreter -> Actions.

>>> from netesto.script import plan
>>> [a.kind for a in plan("DO_SERVER host=h1 exp=1 start=1\\nWAIT 2")]
['DO_SERVER', 'WAIT']
"""

from netesto.script.actions import Action, Location
from netesto.script.estimate import estimate_seconds
from netesto.script.interp import Interpreter, State, plan
from netesto.script.parser import COMMANDS, parse
from netesto.script.store import FileCounter, FileLoader, MemoryCounter, MemoryLoader, parse_defines

__all__ = [
    "Action",
    "COMMANDS",
    "FileCounter",
    "FileLoader",
    "Interpreter",
    "Location",
    "MemoryCounter",
    "MemoryLoader",
    "State",
    "estimate_seconds",
    "parse",
    "parse_defines",
    "plan",
]
