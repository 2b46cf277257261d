"""Console tests route with the gateway tests' deterministic prompt-length classifier."""
from tests.gateway.conftest import default_classifier  # noqa: F401  (a fixture, used by name)
