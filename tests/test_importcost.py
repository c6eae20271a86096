"""netesto._importcost: rfc3987_syntax stands in until used, and jsonschema's iri checks still work."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from netesto._importcost import defer_rfc3987_syntax
put = defer_rfc3987_syntax()
import jsonschema, nbformat
loaded_at_import = hasattr(sys.modules["rfc3987_syntax"], "__file__")
checker = jsonschema.Draft7Validator.FORMAT_CHECKER
v = jsonschema.Draft7Validator({"format": "iri"}, format_checker=checker)
bad, good = list(v.iter_errors("http://a b")), list(v.iter_errors("http://example.com/caf\\u00e9"))
again = list(v.iter_errors("no scheme here"))
print(json.dumps({"put": put, "loaded_at_import": loaded_at_import, "bad": len(bad), "good": len(good),
                  "again": len(again), "real": hasattr(sys.modules["rfc3987_syntax"], "__file__")}))
"""


@pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None, reason="rfc3987_syntax is not installed")
def test_nbformat_imports_without_building_the_iri_grammar_and_iri_checks_still_work() -> None:
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                                    timeout=120).stdout)
    assert out == {"put": True, "loaded_at_import": False, "bad": 1, "good": 0, "again": 1, "real": True}


def test_nothing_is_put_once_the_module_is_imported_or_when_it_is_not_installed() -> None:
    probe = ("import sys\nfrom netesto._importcost import defer_rfc3987_syntax\n"
             "sys.modules['rfc3987_syntax'] = sys\nprint(defer_rfc3987_syntax(), sys.modules['rfc3987_syntax'] is sys)\n"
             "sys.modules.pop('rfc3987_syntax'); sys.path[:] = [p for p in sys.path if 'site-packages' not in p]\n"
             "print(defer_rfc3987_syntax(), 'rfc3987_syntax' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split() == ["False", "True", "False", "False"]
