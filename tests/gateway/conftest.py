"""Gateway tests run the gateway with the deterministic prompt-length classifier unless a
test passes another; the shared fixtures (fakes, gateway, http, redis_prefix) live in
tests/conftest.py."""
import pytest

from gateway.classify import PromptLengthClassifier


@pytest.fixture
def default_classifier():
    return PromptLengthClassifier()
