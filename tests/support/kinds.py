"""Which kind each test is, given centrally (tests/conftest.py applies it at collection). "Kind",
not "tier": tiers are the gateway's model tiers.

- unit: in this process and quick: in-process gateways and fake upstreams on loopback and the
  shared Redis are fine, and so is a short probe (`git ls-files`, `python -c "import ..."`);
  `make test-fast` runs these alone (`pytest -m unit`);
- slow: in this process, but seconds each: real bundled models, torch.compile, Triton's
  interpreter, classifier training;
- live: starts processes of its own: workers, gateway processes, a redis-server, Prometheus, a
  stack, one of our command-line tools;
- chaos: tests/chaos, faults injected into a live stack;
- browser: the console driven in Chromium.

A test gets one of these by the first rule that holds: a mark of its own or its module's
(`pytestmark`), its folder or module below, a fixture it uses (directly or through another) that
is declared `@starts_processes`; else it is unit. A fixture that starts a process without that
declaration fails its test (`pytest_fixture_setup` below), so a new one cannot run as unit by its
name. gpu is beside them: such tests need CUDA and are skipped elsewhere."""
from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

KINDS = ("unit", "slow", "live", "chaos", "browser")
BY_PATH = {  # a folder or module -> its kind
    "tests/chaos": "chaos",
    "tests/gateway/console/test_console_browser.py": "browser",
    "tests/fuzz": "live",  # every fuzz module drives a gateway process (tests/fuzz/fuzz_stack.py)
}
STARTS_PROCESSES = "__tiergate_starts_processes__"


def starts_processes(fixture_function):
    """Declares a fixture that starts processes of its own (a worker, a gateway, a redis-server):
    every test that uses it, directly or through another fixture, is live. Put it below
    `@pytest.fixture`."""
    setattr(fixture_function, STARTS_PROCESSES, True)
    return fixture_function


def _declared(fixturedef) -> bool:
    func = fixturedef.func
    while func is not None:
        if getattr(func, STARTS_PROCESSES, False):
            return True
        func = getattr(func, "__wrapped__", None)
    return False


def kind_by_path(nodeid: str) -> str | None:
    path = PurePosixPath(nodeid.split("::")[0])
    for place in (path, *path.parents):
        if str(place) in BY_PATH:
            return BY_PATH[str(place)]
    return None


def _uses_a_process_starter(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(_declared(d) for chain in defs for d in chain)


def kind_of(item: pytest.Item) -> str:
    own = [mark.name for mark in item.iter_markers() if mark.name in KINDS]
    if own:
        return own[0]  # the nearest mark: the test's own before its module's
    return kind_by_path(item.nodeid) or ("live" if _uses_a_process_starter(item) else "unit")


def assign(items: list[pytest.Item], cuda: bool) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
    for item in items:
        kind = kind_of(item)
        if kind not in {mark.name for mark in item.iter_markers()}:
            item.add_marker(kind)
        if item.get_closest_marker("gpu") and not cuda:
            item.add_marker(skip_gpu)


def children() -> set[int]:
    """The pids of this process's children (Linux: every thread's `children` list)."""
    found = set()
    for listing in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            found.update(int(pid) for pid in listing.read_text().split())
        except OSError:  # the thread ended meanwhile
            continue
    return found


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A fixture of an in-process test (unit, slow) that leaves a new child process running when its
    setup returns must be declared @starts_processes: it makes its tests live."""
    item = getattr(request, "_pyfuncitem", None)
    in_process = item is not None and any(item.get_closest_marker(kind) for kind in ("unit", "slow"))
    before = children() if in_process else set()
    result = yield
    started = children() - before if in_process else set()
    if started and not _declared(fixturedef):
        pytest.fail(f"fixture {fixturedef.argname!r} started process(es) {sorted(started)} but is not declared "
                    "@starts_processes (tests/support/kinds.py): its tests ran as an in-process kind", pytrace=False)
    return result
