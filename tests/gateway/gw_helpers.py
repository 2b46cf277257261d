"""Config builders shared by the gateway tests."""
from __future__ import annotations

from tests.support import SHARED_REDIS



def tier(name, level, urls, model=None, price=(1.0, 2.0)):
    return {"name": name, "level": level, "model": model or f"model-{name}",
            "price_per_mtok": {"input": price[0], "output": price[1]}, "workers": [{"url": u} for u in urls]}


def base_config(tiers: list[dict], prefix: str, **sections) -> dict:
    doc = {"tiers": tiers, "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
           "health": {"interval_s": 0.2, "timeout_s": 0.5},
           "timeouts": {"connect_s": 1.0, "read_s": 5.0}}
    doc.update(sections)
    return doc
