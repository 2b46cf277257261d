import pytest

from .manifests import with_worker_key


@pytest.fixture(autouse=True)
def worker_key():
    with with_worker_key():
        yield
