"""A tenant's `cache:` policy: which requests the exact response cache serves, at what price, and
the semantic cache (tier zero, docs/caching.md)."""
from __future__ import annotations

from dataclasses import dataclass

from typedconfig import setting

CACHE_MODES = ("deterministic", "requested", "off")


@dataclass(frozen=True)
class CachePrice:
    input: float = setting(0.0, "USD per million prompt tokens of an answer served from the cache.", minimum=0)
    output: float = setting(0.0, "USD per million completion tokens of an answer served from the cache.",
                            minimum=0)


SEMANTIC_MIN_SIMILARITY = 0.8  # benchmarks/semantic_pairs.py measures the default (docs/caching.md)


@dataclass(frozen=True)
class SemanticCachePolicy:
    enabled: bool = setting(False, "Serve a cached answer to a similar prompt of this tenant (tier zero, "
                                   "docs/caching.md): only when every answer-bearing token of the two prompts "
                                   "agrees and the similarity clears the bar. Off: no added work on any request.")
    min_similarity: float = setting(SEMANTIC_MIN_SIMILARITY, "The cosine (the router's static vectors) a "
                                                             "candidate needs while sampled hits pass; failed "
                                                             "samples raise it by failure_step each.",
                                    minimum=0.5, maximum=1.0)
    failure_step: float = setting(0.05, "How much each failed sampled semantic hit in the last `window` raises "
                                        "the similarity needed; past 1, no semantic hit is served.",
                                  minimum=0.0, maximum=1.0)
    window: int = setting(200, "Sampled semantic hits remembered for failure_step.", minimum=1, maximum=10_000)
    max_entries: int = setting(10_000, "Prompts this tenant's semantic index keeps per gateway process; past it "
                                       "the least recently used go.", minimum=1, maximum=1_000_000)
    index_bytes: int = setting(16 << 20, "Bytes (vectors, fingerprints, keys) of this tenant's semantic index "
                                         "per process, a quota of its own beside storage.cache_bytes, which "
                                         "bounds the answers.", minimum=4096, maximum=1 << 30)


@dataclass(frozen=True)
class CachePolicy:
    mode: str = setting("deterministic", "Which requests the exact response cache serves and stores (when the "
                                         "gateway's cache.enabled is on): deterministic (temperature 0 or a "
                                         "seed, and any request that asks), requested (only requests that ask: "
                                         "cache.mode exact in the body or x-tiergate-cache-mode: exact) or off "
                                         "(a request that asks is a 400).", choices=CACHE_MODES)
    ttl_s: int = setting(3600, "How long a cached answer is served; a request may ask for less or more "
                               "(cache.ttl_s), up to max_ttl_s.", minimum=1)
    max_ttl_s: int = setting(7 * 86400, "The longest cache.ttl_s a request may ask for; past it, a 400.",
                             minimum=1)
    price_per_mtok: CachePrice = setting(CachePrice(), "What an answer served from the cache is billed (default "
                                                       "nothing); the usage log marks it usage_source cache.")
    semantic: SemanticCachePolicy = setting(SemanticCachePolicy(), "The semantic cache: tier zero, off by "
                                                                   "default (docs/caching.md).")
