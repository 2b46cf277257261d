import pytest

from classifier.dataset import load_splits
from classifier.runtime import ComplexityClassifier


@pytest.fixture(scope="session")
def splits():
    return load_splits()


@pytest.fixture(scope="session")
def shipped():
    return ComplexityClassifier.load()
