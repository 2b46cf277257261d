"""Where per-tenant policies (policies/) plug into the gateway.

The gateway calls, per request: authenticate -> decide -> admit -> (relay) -> settle.
settle runs exactly once per admitted client request, after the final attempt, with the
usage actually served (for a cut stream or a cancelled answer: what the worker says it
generated; see worker_usage.py) and where that count came from.
OpenPolicy is the default when the config has no `tenants:` section.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from policies.config import TenantPolicy
from policies.decision import Decision, RouteRequest, decide_route
from policies.service import RedisAccess, build_service

from .accounting import publish_policy
from ..config import Config


class Tenant(Protocol):
    name: str


class PolicyService(Protocol):
    def authenticate(self, authorization: str | None) -> Tenant: ...

    def holder(self, name: str, key_id: str | None) -> Tenant | None: ...

    def decide(self, tenant, request: RouteRequest, tiers: list) -> Decision: ...

    async def count_request(self, tenant, request_id: str) -> None: ...

    async def hold(self, tenant) -> Any: ...

    async def let_go(self, slot) -> None: ...

    async def admit(self, tenant, request_id: str, estimated_prompt_tokens: int, max_tokens: int, *,
                    n: int = 1, answers: int = 1, attempts: int = 1, tiers=(),
                    client_request_id: str | None = None, tags: tuple[str, ...] = ()) -> Any: ...

    async def settle(self, admission, request_id: str, tier_name: str,
                     prompt_tokens: int, completion_tokens: int, usage_source: str = "worker",
                     price=None, cascade: str | None = None) -> None: ...


@dataclass(frozen=True)
class AnonymousTenant:
    name: str = "anonymous"


class OpenPolicy:
    """No keys, no limits: everyone is 'anonymous'; the one decision function with no tenant rules."""

    _TENANT = AnonymousTenant()
    _NO_RULES = TenantPolicy()

    def __init__(self):
        self._seen, self._ordered = None, []

    def authenticate(self, authorization: str | None) -> AnonymousTenant:
        return self._TENANT

    def holder(self, name: str, key_id: str | None) -> AnonymousTenant | None:
        return self._TENANT if name == self._TENANT.name else None

    def decide(self, tenant, request: RouteRequest, tiers) -> Decision:
        if tiers is not self._seen:  # a new config: sort its tiers once, cheapest first
            self._seen, self._ordered = tiers, sorted(tiers, key=lambda t: t.level)
        return decide_route(self._NO_RULES, request, self._ordered)

    async def count_request(self, tenant, request_id: str) -> None:
        return None

    async def hold(self, tenant) -> None:
        return None

    async def let_go(self, slot) -> None:
        return None

    async def admit(self, tenant, request_id, estimated_prompt_tokens, max_tokens, *, n=1, answers=1, attempts=1,
                    tiers=(), client_request_id=None, tags=()):
        return None

    async def settle(self, admission, request_id, tier_name, prompt_tokens, completion_tokens,
                     usage_source="worker", price=None, cascade=None) -> None:
        return None


def reservation_ttl_s(config: Config) -> float:
    """How long an admission's reservation outlives a gateway that crashed before settling it:
    every upstream attempt waiting its connect and read timeouts in full, plus a minute. A live
    request renews it every third of this (policies/renewal.py), however long it streams."""
    attempts, timeouts = config.failover.max_attempts, config.timeouts
    return attempts * (timeouts.connect_s + timeouts.read_s) + 60.0


def build_policy_service(config: Config, redis, reservation_ttl: float | None = None) -> PolicyService:
    """The policy service for this config: OpenPolicy without tenants or an admin key. Policies get their own
    typed section, the tiers and the Redis settings; never the gateway's whole Config.
    `reservation_ttl` replaces `reservation_ttl_s(config)` (tests and benchmarks of renewal)."""
    if not config.policies.keyed:
        publish_policy(config)
        return OpenPolicy()
    access = RedisAccess(key_prefix=config.redis.key_prefix, timeout_s=config.redis.socket_timeout_s,
                         retry_after_s=config.redis.retry_after_s,
                         reservation_ttl_s=reservation_ttl or reservation_ttl_s(config))
    service = build_service(config.policies, redis, config.tiers, access=access,
                            embedding_tiers=config.embedding_tiers)
    publish_policy(config)  # budgets as gauges, known cost series at 0
    return service
