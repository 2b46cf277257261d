"""The quality monitor's tests route `auto` with the real (ONNX) classifier, whose verdicts the
monitor's threshold shift moves."""
import pytest


@pytest.fixture
def default_classifier():
    return None
