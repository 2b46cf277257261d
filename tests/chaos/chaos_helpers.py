"""Config and checks shared by the in-process chaos tests."""
from __future__ import annotations

import json

from tests.support import SHARED_REDIS

READ_S = 0.4


def config(urls: list[str], prefix: str, redis_url: str = SHARED_REDIS, **sections) -> dict:
    """One tier `small` over the given workers, short timeouts, no escalation."""
    tier = {"name": "small", "level": 1, "model": "m-small", "price_per_mtok": {"input": 1.0, "output": 2.0},
            "workers": [{"url": u} for u in urls]}
    doc = {"tiers": [tier], "redis": {"url": redis_url, "key_prefix": prefix},
           "health": {"interval_s": 60, "timeout_s": 0.5}, "timeouts": {"connect_s": 0.5, "read_s": READ_S},
           "failover": {"max_attempts": 2, "escalate": False}}
    doc.update(sections)
    return doc


def idle(gw) -> bool:
    """No request outstanding on any backend of an in-process gateway."""
    return all(b.outstanding == 0 for b in gw.state.services.upstreams.pools.backends.values())


def sse_events(raw: bytes) -> list[dict]:
    return [json.loads(block[6:]) for block in raw.decode().split("\n\n")
            if block.startswith("data: ") and block != "data: [DONE]"]


