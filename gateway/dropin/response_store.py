"""Stored Responses-API conversations in Redis, scoped to the tenant, with a TTL.

The key holds the tenant's name (`{prefix}responses:{tenant}:{id}`), so a lookup made by
another tenant simply finds nothing: tenant B gets the same 404 for tenant A's response id
as for an id that never existed. A conversation larger than MAX_STORED_BYTES is not
continued (400): the stored history stays bounded however long a chain of turns grows.

What a tenant keeps is bounded by its `storage.stored_responses` and `.stored_responses_bytes`
quotas, counted at their real size: a response that will be stored takes its place before it is
generated, at the size of the conversation so far (a 429 or 413 when there is none), then its
full size when stored; an answer whose conversation no longer fits is answered but not stored,
and its place is given back, as for a response not stored after all.
"""
from __future__ import annotations

import json
import logging
import time

from wire.errors import OpenAIError, bad_request

from ..batches.storage_quota import StorageQuota, responses_quota

log = logging.getLogger(__name__)
STORE_TTL_S = 30 * 86400  # OpenAI keeps stored responses for 30 days
MAX_STORED_BYTES = 4 << 20
PENDING_S = 3600  # a place taken by an answer still being generated; a crashed gateway's goes back after this


def _unavailable(exc: Exception) -> OpenAIError:
    log.warning("response store unavailable: %s", exc)
    return OpenAIError(503, "response store unavailable; try again shortly", code="service_unavailable",
                       headers={"Retry-After": "1"})


def _quota(redis, config) -> StorageQuota:
    return StorageQuota(redis, config.redis.key_prefix, "responses", "stored responses", STORE_TTL_S)


def _key(config, tenant: str, response_id: str) -> str:
    return f"{config.redis.key_prefix}responses:{tenant}:{response_id}"


async def load_history(redis, config, tenant: str, response_id: str) -> list[dict]:
    if redis is None:
        raise bad_request("'previous_response_id' needs the gateway's Redis, which is not configured",
                          param="previous_response_id", code="unsupported_parameter")
    try:
        raw = await redis.get(_key(config, tenant, response_id))
    except Exception as exc:  # Redis down: the conversation cannot be continued right now
        raise _unavailable(exc) from None
    if raw is None:
        raise OpenAIError(404, f"Response with id '{response_id}' not found.", param="previous_response_id",
                          code="not_found")
    if len(raw) > MAX_STORED_BYTES:
        raise bad_request(f"the conversation of '{response_id}' is longer than {MAX_STORED_BYTES} bytes; "
                          "start a new one", param="previous_response_id", code="context_length_exceeded")
    return json.loads(raw)["messages"]


def _encoded(messages: list[dict]) -> bytes:
    return json.dumps({"messages": messages}, separators=(",", ":"), ensure_ascii=False).encode()


async def reserve(redis, config, tenant, response_id: str, conversation: list[dict]) -> None:
    """A place for the response within the tenant's quota, before it is generated, as large as
    the conversation it continues; 503 when Redis is down or refuses writes (a store that cannot
    keep it must not serve it as kept)."""
    try:
        await _quota(redis, config).reserve(tenant.name, response_id, len(_encoded(conversation)),
                                            int(time.time()) + PENDING_S, responses_quota(config, tenant))
    except OpenAIError:
        raise
    except Exception as exc:
        raise _unavailable(exc) from None


async def release(redis, config, tenant: str, response_id: str) -> None:
    """Give back the place of a response that was not stored (an error answer, a cut stream)."""
    try:
        await _quota(redis, config).release(tenant, response_id)
    except Exception as exc:  # it expires after PENDING_S anyway
        log.warning("could not give back the place of response %s: %s", response_id, exc)


async def save(redis, config, tenant, response_id: str, messages: list[dict]) -> bool:
    """Store the conversation, counted at its real size; False (logged) when it passes the quota
    or Redis failed: the answer itself still goes out, and its place is given back."""
    data = _encoded(messages)
    try:
        await _quota(redis, config).reserve(tenant.name, response_id, len(data), int(time.time()) + STORE_TTL_S,
                                            responses_quota(config, tenant))
        await redis.set(_key(config, tenant.name, response_id), data, ex=STORE_TTL_S)
        return True
    except OpenAIError as refusal:  # the answer grew the conversation past the tenant's bytes quota
        log.info("response %s not stored: %s", response_id, refusal.message)
        return False
    except Exception as exc:
        log.warning("could not store response %s: %s", response_id, exc)
        return False
