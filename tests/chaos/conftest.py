"""Chaos tests run in-process gateways with the deterministic prompt-length classifier."""
import pytest

from gateway.core.classify import PromptLengthClassifier


@pytest.fixture
def default_classifier():
    return PromptLengthClassifier()
