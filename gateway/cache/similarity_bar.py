"""The similarity a tenant's semantic hit needs: its `min_similarity`, raised by `failure_step`
for each failed verdict among its last `window` sampled semantic hits, as a weak tier's
failures move traffic off it. Past 1 no semantic hit is served; passes push failures out of
the window and the bar comes back down."""
from __future__ import annotations

from collections import deque

from policies.cache_policy import SemanticCachePolicy


class SimilarityBar:
    def __init__(self):
        self._verdicts: dict[str, deque[bool]] = {}  # tenant -> its last `window` sampled verdicts

    def record(self, tenant: str, passed: bool, window: int) -> None:
        """One sampled semantic hit's verdict (passed: the cached answer was right for the prompt)."""
        verdicts = self._verdicts.get(tenant)
        if verdicts is None or verdicts.maxlen != window:
            verdicts = self._verdicts[tenant] = deque(verdicts or (), maxlen=window)
        verdicts.append(passed)

    def failures(self, tenant: str) -> int:
        return sum(not v for v in self._verdicts.get(tenant, ()))

    def needed(self, tenant: str, policy: SemanticCachePolicy) -> float:
        return policy.min_similarity + policy.failure_step * self.failures(tenant)
