"""How much load the chaos and fuzz tests put on: 1 in `make test`, N under
`python -m benchmarks.chaos --scale N` (which sets these variables for its pytest run)."""
from __future__ import annotations

import os

SCALE_ENV = "TIERGATE_CHAOS_SCALE"
FUZZ_PROFILE_ENV = "TIERGATE_FUZZ_PROFILE"


def chaos_scale() -> int:
    """How many times more load the chaos tests put on (1 in `make test`)."""
    return max(1, int(os.environ.get(SCALE_ENV, "1")))


def fuzz_profile() -> str:
    """The Hypothesis profile the fuzz tests run under (registered in tests/fuzz/conftest.py)."""
    return os.environ.get(FUZZ_PROFILE_ENV, "tiergate-fuzz")
