"""A new model behind a tier never serves the old one's answers: the gateway reads the identity a
worker's card states when the worker comes back from being down, and the tier's cache keys
change with it; the other tier's entries stay. In process, against fake upstreams."""
from __future__ import annotations

import openai

from gateway.cache.identity import stated_identity
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for

OLD = {"model": "m", "weights_sha256": "a" * 64, "settings": {"dtype": "float32"}}
NEW = {"model": "m", "weights_sha256": "b" * 64, "settings": {"dtype": "float32"}}


def _stated(identity: dict) -> str:
    return stated_identity({"object": "list", "data": [{"id": "m", "identity": identity}]})


async def _cached(client, model: str) -> str:
    raw = await client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "same question"}], temperature=0)
    return raw.headers["x-tiergate-cache"]


async def _holds(gw, entries: int) -> bool:
    store, prefix = gw.state.services.cache.store, gw.state.services.config.redis.key_prefix
    return (await store.used(prefix, "t:anonymous"))[0] >= entries


async def test_a_worker_back_with_new_weights_never_serves_the_old_answers(fakes, gateway, redis_prefix):
    (small, small_url), (large, large_url) = await fakes(2)
    small.identity = large.identity = OLD
    gw = await gateway(base_config([tier("small", 1, [small_url]), tier("large", 2, [large_url])], redis_prefix,
                                   cache={"enabled": True}))
    backend = gw.state.services.upstreams.pools.by_tier["small"].backends[0]
    await wait_for(lambda: backend.identity == _stated(OLD), timeout_s=5)
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        for model in ("small", "large"):
            assert await _cached(client, model) == "miss"
        await wait_for(lambda: _holds(gw, 2), timeout_s=5, what="two entries")
        assert [await _cached(client, m) for m in ("small", "large")] == ["hit", "hit"]
        served = small.served

        small.healthy = False  # restarted with other weights: down, then back with a new card
        await wait_for(lambda: backend.identity is None, timeout_s=5)
        small.identity, small.healthy = NEW, True
        await wait_for(lambda: backend.identity == _stated(NEW), timeout_s=5)
        assert await _cached(client, "small") == "miss" and small.served == served + 1
        assert await _cached(client, "large") == "hit"


async def test_an_answer_from_another_build_than_the_card_said_is_not_kept(fakes, gateway, redis_prefix):
    """A worker restarted as another build faster than the health checks: its answers name the new
    identity, so they are not kept under the old key, and its card is read again."""
    (small, small_url), = await fakes(1)
    small.identity = OLD
    gw = await gateway(base_config([tier("small", 1, [small_url])], redis_prefix, cache={"enabled": True}))
    backend = gw.state.services.upstreams.pools.by_tier["small"].backends[0]
    await wait_for(lambda: backend.identity == _stated(OLD), timeout_s=5)
    keyed_on = gw.state.services.cache.identities["small"]
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        small.identity = NEW  # never down: the card the gateway read still says OLD
        assert await _cached(client, "small") == "miss"
        assert backend.identity is None or backend.identity == _stated(NEW)  # the card is asked again
        await gw.state.services.cache.writes.drain()
        assert not await _holds(gw, 1)  # the answer of the new build was not kept under OLD's key
        await wait_for(lambda: backend.identity == _stated(NEW), timeout_s=5, what="the new card read")
        await wait_for(lambda: gw.state.services.cache.identities["small"] != keyed_on, timeout_s=5)
        assert await _cached(client, "small") == "miss"  # now keyed on the new identity, and kept
        await wait_for(lambda: _holds(gw, 1), timeout_s=5, what="the new build's answer kept")
        assert await _cached(client, "small") == "hit"
