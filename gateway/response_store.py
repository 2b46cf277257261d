"""Stored Responses-API conversations in Redis, scoped to the tenant, with a TTL.

The key holds the tenant's name (`{prefix}responses:{tenant}:{id}`), so a lookup made by
another tenant simply finds nothing: tenant B gets the same 404 for tenant A's response id
as for an id that never existed. A conversation larger than MAX_STORED_BYTES is not
continued (400): the stored history stays bounded however long a chain of turns grows.
"""
from __future__ import annotations

import json
import logging

from wire.errors import OpenAIError, bad_request

log = logging.getLogger(__name__)
STORE_TTL_S = 30 * 86400  # OpenAI keeps stored responses for 30 days
MAX_STORED_BYTES = 4 << 20


def _key(config, tenant: str, response_id: str) -> str:
    return f"{config.redis.key_prefix}responses:{tenant}:{response_id}"


async def load_history(redis, config, tenant: str, response_id: str) -> list[dict]:
    if redis is None:
        raise bad_request("'previous_response_id' needs the gateway's Redis, which is not configured",
                          param="previous_response_id", code="unsupported_parameter")
    try:
        raw = await redis.get(_key(config, tenant, response_id))
    except Exception as exc:  # Redis down: the conversation cannot be continued right now
        log.warning("response store unavailable: %s", exc)
        raise OpenAIError(503, "response store unavailable; try again shortly", code="service_unavailable",
                          headers={"Retry-After": "1"}) from None
    if raw is None:
        raise OpenAIError(404, f"Response with id '{response_id}' not found.", param="previous_response_id",
                          code="not_found")
    if len(raw) > MAX_STORED_BYTES:
        raise bad_request(f"the conversation of '{response_id}' is longer than {MAX_STORED_BYTES} bytes; "
                          "start a new one", param="previous_response_id", code="context_length_exceeded")
    return json.loads(raw)["messages"]


async def save(redis, config, tenant: str, response_id: str, messages: list[dict]) -> bool:
    """Store the conversation; False (logged) when Redis failed: the answer itself still goes out."""
    data = json.dumps({"messages": messages}, separators=(",", ":"), ensure_ascii=False)
    try:
        await redis.set(_key(config, tenant, response_id), data, ex=STORE_TTL_S)
        return True
    except Exception as exc:
        log.warning("could not store response %s: %s", response_id, exc)
        return False
