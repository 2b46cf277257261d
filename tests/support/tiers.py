"""Which tier each test belongs to, given centrally (tests/conftest.py applies it at collection):

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
(`pytestmark`), its folder or module below, a fixture it uses; else it is unit. gpu is beside
them: such tests need CUDA and are skipped elsewhere."""
from __future__ import annotations

from pathlib import PurePosixPath

import pytest

TIERS = ("unit", "slow", "live", "chaos", "browser")
BY_PATH = {  # a folder or module -> its tier
    "tests/chaos": "chaos",
    "tests/gateway/console/test_console_browser.py": "browser",
    "tests/fuzz": "live",  # every fuzz module drives a gateway process (tests/fuzz/fuzz_stack.py)
}
# fixtures that start processes: a stack of workers and gateways, one worker, a redis-server, ...
LIVE_FIXTURES = {"stack", "worker", "workers", "live", "own_redis", "two_gateways", "running", "shared_worker",
                 "shared_embed_worker"}


def tier_by_path(nodeid: str) -> str | None:
    path = PurePosixPath(nodeid.split("::")[0])
    for place in (path, *path.parents):
        if str(place) in BY_PATH:
            return BY_PATH[str(place)]
    return None


def tier_of(item: pytest.Item) -> str:
    own = [mark.name for mark in item.iter_markers() if mark.name in TIERS]
    if own:
        return own[0]  # the nearest mark: the test's own before its module's
    return tier_by_path(item.nodeid) or ("live" if LIVE_FIXTURES & set(item.fixturenames) else "unit")


def assign(items: list[pytest.Item], cuda: bool) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
    for item in items:
        tier = tier_of(item)
        if tier not in {mark.name for mark in item.iter_markers()}:
            item.add_marker(tier)
        if item.get_closest_marker("gpu") and not cuda:
            item.add_marker(skip_gpu)
