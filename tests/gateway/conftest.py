"""Gateway tests run the gateway with the deterministic prompt-length classifier unless a
test passes another; the shared fixtures (fakes, gateway, http, redis_prefix) live in
tests/conftest.py."""
import pytest

from gateway.core.classify import PromptLengthClassifier
from tests.gateway.e2e_stack import e2e_stack, tier
from tests.support.kinds import starts_processes


@pytest.fixture
def default_classifier():
    return PromptLengthClassifier()


@pytest.fixture(scope="session")
@starts_processes
def small_stack(tmp_path_factory, shared_worker):
    """The session's worker behind one gateway process (tier small), started once for the e2e
    modules that only send requests through it and change nothing in it."""
    with e2e_stack(tmp_path_factory.mktemp("small-stack"), lambda urls: [tier("small", 1, urls)],
                   n_workers=0, running_workers=(shared_worker,)) as stack:
        yield stack
