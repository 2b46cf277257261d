"""tests/support/kinds.py: a test's kind follows what its fixtures do, not what they are called. A
fixture declared @starts_processes makes its tests live; one that starts a process without the
declaration fails the in-process test that used it, whatever its name."""
from __future__ import annotations

import ast
import os
import signal

from tests.support.kinds import children

pytest_plugins = ["pytester"]

CONFTEST = '''
import subprocess, sys
import pytest
from tests.support.kinds import assign, kind_of, starts_processes, pytest_fixture_setup  # noqa: F401

KINDS = {}

def pytest_collection_modifyitems(config, items):
    KINDS.update({item.name: kind_of(item) for item in items})
    assign(items, cuda=False)

def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("KINDS " + repr(sorted(KINDS.items())))

def _sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])

@pytest.fixture
def helper_daemon():  # a name no list knows
    proc = _sleeper()
    yield proc
    proc.kill(); proc.wait()

@pytest.fixture
@starts_processes
def declared_daemon():
    proc = _sleeper()
    yield proc
    proc.kill(); proc.wait()

@pytest.fixture
def through_another(declared_daemon):
    return declared_daemon

@pytest.fixture
def workers():  # a name that used to make a test live, for a fixture that starts nothing
    return ["a", "b"]
'''
TESTS = '''
def test_undeclared(helper_daemon): pass
def test_declared(declared_daemon): pass
def test_through_another(through_another): pass
def test_named_like_a_stack(workers): pass
'''


def test_a_planted_process_starting_fixture_under_a_new_name_is_caught(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_planted=TESTS)
    before = children()
    try:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-W", "ignore")
    finally:
        for pid in children() - before:  # what the undeclared fixture left running
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*fixture 'helper_daemon' started process(es)*not declared @starts_processes*"])
    kinds = dict(ast.literal_eval(next(line for line in result.outlines if line.startswith("KINDS "))[6:]))
    assert kinds == {"test_undeclared": "unit", "test_declared": "live", "test_through_another": "live",
                     "test_named_like_a_stack": "unit"}
