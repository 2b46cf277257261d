"""Which model a tier's answers come from, as the response cache keys them: what its workers'
`/v1/models` cards state (our worker: the model's name, a digest of its weights and the
settings that change its numbers), and the tier's config version, so that a new model, new
weights or a new upstream for the tier never serve the old one's answers."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from wire.model_identity import identity_digest

from ..config import Config, Tier

MAX_IDENTITY_CHARS = 4096  # a card's identity larger than this states nothing we keep
UNSTATED = "-"  # a worker whose card states no identity (a foreign upstream)


def _digest(value: Any) -> str:
    return identity_digest({"value": value})


def stated_identity(card: Any) -> str:
    """The identity a `/v1/models` answer states for its (first) model, as a digest; UNSTATED
    when it states none, or one too large to be a digest of anything."""
    data = card.get("data") if isinstance(card, Mapping) else None
    entry = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) else {}
    stated = entry.get("identity")
    if not isinstance(stated, Mapping) or len(json.dumps(stated, default=str)) > MAX_IDENTITY_CHARS:
        return UNSTATED
    return identity_digest(stated)


def config_version(tier: Tier) -> str:
    """What the config says the tier is: its model and upstreams, and the operator's label of the
    model behind them (`model_version`, for an upstream that states no identity)."""
    return _digest([tier.name, tier.model, sorted(w.url for w in tier.workers), tier.model_version])


def tier_identities(config: Config, pools) -> dict[str, str]:
    """Per chat tier: its config version with the identities its read cards state (a worker not
    read yet adds nothing; one that states none adds UNSTATED)."""
    out = {}
    for tier in config.tiers:
        pool = pools.by_tier.get(tier.name)
        stated = sorted({b.identity for b in (pool.backends if pool else []) if b.identity is not None})
        out[tier.name] = _digest([config_version(tier), stated])
    return out
