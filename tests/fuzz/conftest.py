import pytest
from hypothesis import HealthCheck, settings

from measure.scale import chaos_scale
from tests.fuzz.fuzz_stack import fake_upstream_stack

# The fuzz tests' Hypothesis settings, picked by TIERGATE_FUZZ_PROFILE (benchmarks/chaos.py):
# `tiergate-fuzz` (default, `make test`): bounded and derandomized, the same inputs every run;
# `tiergate-fuzz-long` (`python -m benchmarks.chaos`): TIERGATE_CHAOS_SCALE times the examples,
# randomized so each long run explores new inputs (a failure prints its reproduction blob).
settings.register_profile("tiergate-fuzz", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("tiergate-fuzz-long", settings.get_profile("tiergate-fuzz"),
                          max_examples=40 * chaos_scale(), derandomize=False, database=None, print_blob=True)


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    """One real gateway + fake upstream for the fuzz modules that only send it requests."""
    with fake_upstream_stack(tmp_path_factory.mktemp("live")) as live:
        yield live
