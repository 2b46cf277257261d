"""The cache key of a request: everything that changes its answer, canonically written. The
client's body less what only shapes the delivery, the tier that would answer it with that
tier's model identity (cache/identity.py), and the max_tokens its worker would be sent.
`context_key` is the same less the prompt: what a semantic hit must still match exactly."""
from __future__ import annotations

import hashlib
import json

from ..core.request import GatewayRequest, max_tokens_on

KEY_VERSION = 1  # raise it when the canonical form changes: old entries are then never read
# fields that do not change what is generated: the model name (the tier and its identity stand
# for it), the usage chunk, the end user's label, and the max_tokens fields (the effective
# value stands for them, after the tenant's and the tier's caps)
NOT_IN_KEY = frozenset({"model", "stream_options", "user", "max_tokens", "max_completion_tokens", "service_tier",
                        "store"})
PROMPT_FIELDS = frozenset({"messages", "prompt"})


def _digest(request: GatewayRequest, identity: str, left_out: frozenset[str]) -> str:
    tier = request.route.tier
    body = {k: v for k, v in request.body.items() if k not in left_out}
    limit = max_tokens_on(request.max_tokens, request.route.decision, tier)
    canonical = json.dumps([KEY_VERSION, request.kind, tier.name, identity, limit, body], sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def cache_key(request: GatewayRequest, identity: str) -> str:
    return _digest(request, identity, NOT_IN_KEY)


def context_key(request: GatewayRequest, identity: str) -> str:
    return _digest(request, identity, NOT_IN_KEY | PROMPT_FIELDS)
