"""Console tests route with the deterministic prompt-length classifier, as the gateway tests do."""
import pytest

from gateway.classify import PromptLengthClassifier


@pytest.fixture
def default_classifier():
    return PromptLengthClassifier()
