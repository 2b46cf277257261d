"""Per cache scope (a tenant, or an operator's shared group), the prompts whose answers are in
the exact cache: each one's vector and exact key, in a bucket named by what must match exactly
(the request less its prompt, the tier's model identity, the prompt's answer-bearing tokens).
The nearest neighbours of a prompt are looked for in its bucket only. Bounded per scope by
count and bytes, least recently used first out."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

ITEM_OVERHEAD = 160  # bytes an item costs beyond its vector and strings (dict slots, object headers)


@dataclass(slots=True)
class _Item:
    bucket: str
    vector: np.ndarray
    tier: str
    size: int


class _Scope:
    def __init__(self):
        self.items: OrderedDict[str, _Item] = OrderedDict()  # exact key -> item, least recently used first
        self.buckets: dict[str, set[str]] = {}
        self.bytes = 0

    def drop(self, key: str) -> None:
        item = self.items.pop(key)
        members = self.buckets[item.bucket]
        members.discard(key)
        if not members:
            del self.buckets[item.bucket]
        self.bytes -= item.size


class SemanticIndex:
    def __init__(self):
        self._scopes: dict[str, _Scope] = {}

    def add(self, scope: str, bucket: str, key: str, vector: np.ndarray, tier: str, max_entries: int,
            max_bytes: int) -> int:
        """Remember a kept answer's prompt; how many older prompts went to make room."""
        held = self._scopes.setdefault(scope, _Scope())
        if key in held.items:
            held.drop(key)
        size = vector.nbytes + len(key) + len(bucket) + ITEM_OVERHEAD
        if size > max_bytes:
            return 0
        evicted = 0
        while held.items and (len(held.items) >= max_entries or held.bytes + size > max_bytes):
            held.drop(next(iter(held.items)))
            evicted += 1
        held.items[key] = _Item(bucket, vector, tier, size)
        held.buckets.setdefault(bucket, set()).add(key)
        held.bytes += size
        return evicted

    def nearest(self, scope: str, bucket: str, vector: np.ndarray, limit: int) -> list[tuple[float, str]]:
        """(cosine, exact key) of the bucket's prompts, the most similar first, at most `limit`."""
        held = self._scopes.get(scope)
        keys = list(held.buckets.get(bucket, ())) if held is not None else []
        if not keys:
            return []
        sims = np.stack([held.items[k].vector for k in keys]) @ vector
        order = np.argsort(-sims)[:limit]
        return [(float(sims[i]), keys[i]) for i in order]

    def touch(self, scope: str, key: str) -> None:
        held = self._scopes.get(scope)
        if held is not None and key in held.items:
            held.items.move_to_end(key)

    def forget(self, scope: str, key: str) -> None:
        held = self._scopes.get(scope)
        if held is not None and key in held.items:
            held.drop(key)

    def clear(self, scope: str, tier: str | None = None) -> int:
        """Forget a scope's prompts (only those answered by `tier` when given); how many went."""
        held = self._scopes.get(scope)
        if held is None:
            return 0
        keys = [k for k, item in held.items.items() if tier is None or item.tier == tier]
        for key in keys:
            held.drop(key)
        return len(keys)

    def used(self, scope: str) -> tuple[int, int]:
        held = self._scopes.get(scope)
        return (len(held.items), held.bytes) if held is not None else (0, 0)
