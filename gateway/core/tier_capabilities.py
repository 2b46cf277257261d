"""What each tier can do: the config's `capabilities:` over what its workers' cards state, and
whether a worker answers at all (its health).

Workers are asked once (`GET /v1/models`) when they are first seen healthy, and again after
they come back from being down (a restarted worker may serve another build). Routing reads
`TierCapabilities.by_tier`, a dict swapped whole, so the request path never waits on this.
"""
from __future__ import annotations

import asyncio
import json
from typing import NamedTuple

import aiohttp

from wire.capabilities import Capabilities, from_models_card, intersect

from ..cache.identity import UNSTATED, stated_identity
from ..config import Config
from .pool import DOWN, SILENT, UP, Backend, Pools
from .transport import Transport, get_small

MAX_CARD_BYTES = 256 * 1024


class WorkerCard(NamedTuple):
    capabilities: Capabilities
    identity: str  # the model identity it states (cache/identity.py), UNSTATED if none


SAYS_NOTHING = WorkerCard(Capabilities(), UNSTATED)


async def read_card(transport: Transport, backend: Backend, timeout_s: float) -> WorkerCard | None:
    """What the worker states; a worker without a readable card states nothing; None: no answer."""
    try:
        _, raw = await get_small(transport, backend.url + "/v1/models", backend.auth_headers, timeout_s,
                                      MAX_CARD_BYTES)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        return None  # down or silent: ask again once it is healthy
    try:
        card = json.loads(raw) if raw is not None else None
        return WorkerCard(from_models_card(card), stated_identity(card)) if card is not None else SAYS_NOTHING
    except ValueError:
        return SAYS_NOTHING


async def probe_health(transport: Transport, backend: Backend, timeout_s: float) -> str:
    """UP (200), DOWN (another status, or nothing listens) or SILENT (no answer within timeout_s:
    a worker that hangs, or one too busy to answer in time)."""
    try:
        response = await transport.get(backend.url + "/health", headers=backend.auth_headers,
                                       timeout=aiohttp.ClientTimeout(total=timeout_s))
        response.release()
        return UP if response.status == 200 else DOWN
    except asyncio.TimeoutError:  # aiohttp's own timeouts are these too
        return SILENT
    except (aiohttp.ClientError, OSError):
        return DOWN


def by_tier(config: Config, pools: Pools) -> dict[str, Capabilities]:
    """Per tier: stated fields from the config, the rest from what all its read cards share."""
    out = {}
    for tier in config.tiers:
        pool = pools.by_tier.get(tier.name)
        cards = [b.capabilities for b in (pool.backends if pool else []) if b.capabilities is not None]
        out[tier.name] = tier.capabilities.over(intersect(cards))
    return out
