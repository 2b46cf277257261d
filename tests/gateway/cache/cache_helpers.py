"""In-process gateways with the response cache on: the real request path (`serve`) and the
shared Redis under a test's own key prefix, around a scripted upstream that answers every
request with a new text, so a hit is told from a fresh answer by its content."""
from __future__ import annotations

import itertools
import json
from dataclasses import replace

from gateway.api.handlers import serve
from policies.keys import hash_key
from tests.gateway.gw_helpers import base_config, tier
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import Reply, ScriptedTransport, chat_answer

KEYS = {"acme": "sk-cache-acme", "globex": "sk-cache-globex", "initech": "sk-cache-initech"}
SMALL, LARGE = "http://small.test", "http://large.test"


def numbered_upstream() -> ScriptedTransport:
    """Answer n says `answer n`, with 7 prompt and 3 completion tokens."""
    count = itertools.count(1)
    return ScriptedTransport(lambda sent: Reply(body=chat_answer(f"answer {next(count)}", 7, 3)))


def cache_config(prefix: str, cache: dict | None = None, tenants: dict | None = None, **policy) -> dict:
    """Three tenants with `policy` (and per tenant `tenants[name]`), two tiers, the cache on."""
    doc = {name: {"keys": [{"id": "k", "sha256": hash_key(key)}], **policy, **(tenants or {}).get(name, {})}
           for name, key in KEYS.items()}
    return base_config([tier("small", 1, [SMALL]), tier("large", 2, [LARGE])], prefix, tenants=doc,
                       cache={"enabled": True, **(cache or {})})


def cached_services(prefix: str, transport: ScriptedTransport, cache: dict | None = None, tenants: dict | None = None,
                    **policy):
    return services_for(cache_config(prefix, cache, tenants, **policy), transport)


async def ask(services, tenant: str = "acme", headers: dict | None = None, **body) -> tuple[dict, str | None]:
    """One chat request through `serve` (small tier, temperature 0 unless given), its background
    cache write finished: (the answer's JSON, its x-tiergate-cache header)."""
    call = chat_call(services, KEYS[tenant], **{"model": "small", "temperature": 0, **body})
    answer = await serve(services, replace(call, headers=headers))
    await services.cache.writes.drain()
    return json.loads(answer.body), answer.headers.get("x-tiergate-cache")


def text(answer: dict) -> str:
    return answer["choices"][0]["message"]["content"]
