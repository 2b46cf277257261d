"""Quality monitor tests use the shared fixtures of tests/conftest.py (fakes, gateway with
the real classifier, http, redis_prefix). The real-worker helpers come from
tests/gateway/e2e_stack.py, hence the path entry."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
