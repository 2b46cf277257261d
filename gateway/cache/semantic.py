"""The semantic cache, tier zero (docs/caching.md): a tenant that enables it may be served the
cached answer of a similar prompt. Similar means, all three: the same request less its prompt
(tier, model identity, parameters, tools: key.context_key), the same answer-bearing tokens in the
same order over the whole prompt (answer_bearing.py), and a cosine of the router's static
vectors at or above what the tenant's sampled hits allow (similarity_bar.py). The answers stay
in the exact cache's store: invalidating it, or a new model identity, leaves nothing to serve."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from policies.cache_policy import SemanticCachePolicy

from .answer_bearing import fingerprint, normalised
from .prompt_text import prompt_turns
from .semantic_index import SemanticIndex
from .similarity_bar import SimilarityBar

CANDIDATES = 4  # neighbours tried per lookup (one may have expired from the store)


def _vectors():
    from classifier.static_vectors import packaged  # loaded on the first semantic lookup only
    return packaged()


def embed(turns: list[tuple[str, str]]) -> np.ndarray:
    """The router's vector of a prompt as the guard reads it (answer_bearing.normalised)."""
    return _vectors().embed("\n".join(normalised(text) for _, text in turns))


@dataclass(frozen=True, slots=True)
class Probe:
    """A prompt as the semantic index files it."""
    bucket: str
    vector: np.ndarray


@dataclass
class SemanticCache:
    index: SemanticIndex = field(default_factory=SemanticIndex)
    bar: SimilarityBar = field(default_factory=SimilarityBar)

    def probe(self, kind: str, body: dict, context: str) -> Probe | None:
        """The prompt's bucket and vector; None for a prompt it does not compare."""
        turns = prompt_turns(kind, body)
        if turns is None:
            return None
        bucket = hashlib.sha256(f"{context}:{fingerprint(turns)}".encode()).hexdigest()
        vector = embed(turns)
        return Probe(bucket, vector) if vector.any() else None

    def candidates(self, scope: str, tenant: str, probe: Probe, policy: SemanticCachePolicy) -> list[tuple[float, str]]:
        """(cosine, exact key) of the neighbours that clear the tenant's bar, best first."""
        needed = self.bar.needed(tenant, policy)
        if needed > 1.0:
            return []
        return [(sim, key) for sim, key in self.index.nearest(scope, probe.bucket, probe.vector, CANDIDATES)
                if sim >= needed]

    def verdicts(self, tenant: str, policy: SemanticCachePolicy):
        """Where the quality monitor's verdict on one of the tenant's sampled hits goes."""
        return lambda passed: self.bar.record(tenant, passed, policy.window)

    def remember(self, scope: str, key: str, probe: Probe, tier: str, policy: SemanticCachePolicy) -> int:
        return self.index.add(scope, probe.bucket, key, probe.vector, tier, policy.max_entries, policy.index_bytes)
