"""PolicyService: what the gateway calls (authenticate, decide, admit, settle, usage)."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, replace
from datetime import datetime
from zoneinfo import ZoneInfo
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from redis.exceptions import OutOfMemoryError

from policies.redis_errors import REDIS_DOWN, RedisFull, RedisUnavailable, pooled
from wire.errors import OpenAIError

from policies import metrics
from policies.budgets import Budgets
from policies.config import PoliciesConfig, Tenant
from policies.costs import TierPrice, micro_to_usd, request_cost_micro, tier_price
from policies.decision import Decision, RouteRequest, UsageSnapshot, decide_route
from policies.alerts.deliverer import BudgetAlerts, budget_alerts
from policies.keys import KeyRing
from policies.registry.admin import RegistryAdmin
from policies.registry.cache import RegistryCache, registry_cache
from policies.local_limits import LocalLimits
from policies.concurrency import LEASE_S, ConcurrencyLimits, Slot
from policies.periods import PERIODS, Periods, periods_at
from policies.store import (ADMITTED, PolicyStore, Reservation, Spend, holds_budget,
                            key_budgets_of, limits_of)
from policies.refusals import allowed_tags, refusal
from policies.renewal import Renewals
from policies.usage_report import usage_report
from policies.replica import ReplicaState, replica_state
from policies.usage_log import UsageLog, UsageRecord
from typedconfig import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Admission:
    tenant: Tenant
    request_id: str
    charged_tokens: int  # prompt estimate + n x max_tokens, charged to the token buckets
    max_tokens: int
    limited: bool   # False: admitted without Redis (fail-open), by this replica's local limits only
    client_request_id: str | None = None  # the client's own id: logged with the usage, never a key
    tags: tuple[str, ...] = ()  # the request's tags its tenant allows (allowed_tags): spend by tag


@dataclass(frozen=True)
class RedisAccess:
    """How policies use the gateway's Redis: the `redis:` section's knobs, one each for all users."""
    key_prefix: str
    timeout_s: float      # longest wait for one Redis call
    retry_after_s: float  # after a failure, skip Redis this long (no per-request timeout stalls)
    reservation_ttl_s: float = 600.0  # an unsettled reservation (its gateway crashed) stops counting after this


class PolicyService:
    def __init__(self, config: PoliciesConfig, redis: Any, tiers: Sequence[Any], *, access: RedisAccess,
                 replica: ReplicaState | None = None, registry: RegistryCache | None = None,
                 alerts: BudgetAlerts | None = None,
                 clock: Callable[[], datetime] | None = None, priced_only: Sequence[Any] = ()):
        self.config = config
        # Tiers that settle bills but that decide() never routes to (embeddings: chosen by name).
        self._priced_only = {(t["name"] if isinstance(t, dict) else t.name): tier_price(t) for t in priced_only}
        self.access = access
        self.store = PolicyStore(redis, access.key_prefix, config.idempotency_ttl_s, access.timeout_s)
        self.replica = replica or ReplicaState(UsageLog(config.usage_log))
        self.usage_log = self.replica.usage_log
        zone = ZoneInfo(config.timezone)  # days and months of budgets and usage begin at its midnight
        self.clock = clock or (lambda: datetime.now(zone))
        self._prices: dict[str, TierPrice] = {}
        self._tiers_seen: Any = None
        self.update_tiers(tiers)
        tier_names = [t["name"] if isinstance(t, dict) else t.name for t in self._ordered]
        # the API-managed tenants and keys (None: the config's alone, as in tests built without Redis)
        self.registry = registry
        self.alerts = alerts  # budget alerts (None: none, as in tests built without them)
        self.keyring = KeyRing(config, tier_names, registry)
        self.admin = RegistryAdmin(registry, config, tier_names, lambda: self.replica.audit_log) \
            if registry is not None else None
        self.week_start = config.week_start_index
        self._spent: dict[tuple[str, str | None], tuple[Periods, Spend]] = {}  # (tenant, key) -> last seen
        self._member_seq = 0
        self.local = LocalLimits()  # the limits this replica applies alone while Redis is away
        self.renewals = Renewals(self._renew, access.reservation_ttl_s)
        self.concurrency = ConcurrencyLimits(redis, access.key_prefix)
        self._open: dict[str, Slot] = {}  # slots this replica holds in Redis, renewed while their request runs
        self.slot_renewals = Renewals(self._renew_slots, LEASE_S)

    # -- identity and routing (synchronous) ---------------------------------------------------
    def authenticate(self, authorization: str | None) -> Tenant:
        return self.keyring.authenticate(authorization)

    def holder(self, name: str, key_id: str | None) -> Tenant | None:
        return self.keyring.holder(name, key_id)

    def update_tiers(self, tiers: Sequence[Any]) -> None:
        self._prices = {**self._priced_only, **{(t["name"] if isinstance(t, dict) else t.name): tier_price(t)
                                                for t in tiers}}
        self._tiers_seen = tiers
        self._ordered = sorted(tiers, key=lambda t: t["level"] if isinstance(t, dict) else t.level)

    def decide(self, tenant: Tenant, request: RouteRequest, tiers: Sequence[Any]) -> Decision:
        if tiers is not self._tiers_seen:   # the gateway reloaded its config: new prices (sorted once)
            self.update_tiers(tiers)
        usage = self.snapshot(tenant.name)
        key_budgets = key_budgets_of(tenant)
        if key_budgets.any:
            usage = replace(usage, key_budgets=key_budgets, key_spend=self.spent(tenant.name, tenant.key_id))
        return decide_route(tenant.policy, request, self._ordered, usage)

    def snapshot(self, tenant: str) -> UsageSnapshot:
        """Spend as of this replica's last admit/settle for the tenant (soft budgets read this)."""
        spent = self.spent(tenant)
        return UsageSnapshot(spent.daily, spent.monthly, spent.weekly)

    def spent(self, tenant: str, key_id: str | None = None) -> Spend:
        """The tenant's (or its key's own) spend of the current periods as this replica last saw it;
        a period that has ended since counts from 0."""
        now = self.periods()
        seen = self._spent.get((tenant, key_id))
        if seen is None:
            return Spend()
        then, spend = seen
        return Spend(*(spend.of(p) if then.label(p) == now.label(p) else 0 for p in PERIODS))

    def _spend_known(self, tenant: Tenant) -> bool:
        """Whether this replica has read the current period's spend for every hard budget of the
        tenant and its key: a replica that never has must not count it from 0 while Redis is away."""
        now = self.periods()
        for key_id, budgets in ((None, tenant.policy.budgets), (tenant.key_id, key_budgets_of(tenant))):
            hard = [p for p in PERIODS if budgets.amount(p, "hard") is not None]
            seen = self._spent.get((tenant.name, key_id)) if hard else None
            if hard and (seen is None or any(seen[0].label(p) != now.label(p) for p in hard)):
                return False
        return True

    def _remember(self, tenant: str, key_id: str | None, periods: Periods, spend: Spend) -> None:
        self._spent[(tenant, key_id)] = (periods, spend)

    def periods(self) -> Periods:
        """The current day, week and month in policy.timezone."""
        return periods_at(self.clock(), self.week_start)

    # -- Redis with a fail mode ------------------------------------------------------------------
    async def call_redis(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        if time.monotonic() < self.replica.redis_down_until:
            raise RedisUnavailable(operation)
        waiting_for_pool = [False]
        try:
            async with asyncio.timeout(self.access.timeout_s):  # in this task: wait_for would start one per call
                return await pooled(call, waiting_for_pool)
        except OutOfMemoryError as exc:
            log.warning("redis refused a write during %s: %s", operation, exc)
            raise RedisFull(operation) from exc
        except REDIS_DOWN as exc:
            if not waiting_for_pool[0]:  # a busy client is not an outage; anything else opens the breaker
                self.replica.redis_down_until = time.monotonic() + self.access.retry_after_s
            log.warning("redis unavailable during %s: %s: %s", operation, type(exc).__name__, exc)
            raise RedisUnavailable(operation) from exc

    async def count_request(self, tenant: Tenant, request_id: str) -> None:
        """One request against the tenant's rate limits, for an endpoint that generates nothing
        (files, batches, usage, /v1/route): a spent budget does not refuse it, so a tenant can
        still read its usage and its results; nor does a Redis that is full or away, whatever
        `on_redis_error` says (the call spends nothing, and deleting files is what frees Redis):
        this replica's own rate limits count it then."""
        unbudgeted = replace(tenant, policy=replace(tenant.policy, budgets=Budgets()),
                             keys=tuple(replace(key, budgets=Budgets()) for key in tenant.keys))
        try:
            await self.admit(unbudgeted, request_id, 0, 0)
        except OpenAIError as refusal:
            if refusal.status != 503:
                raise
            result = self.local.admit(unbudgeted, limits_of(unbudgeted), request_id, 0, 0, (Spend(), Spend()))
            if result.status != ADMITTED:
                raise refusal(tenant, result, self.clock(), self.week_start) from None

    # -- open requests ----------------------------------------------------------------------------
    async def hold(self, tenant: Tenant) -> Slot | None:
        """A place among the tenant's and its key's open requests, held until `let_go`; the 429
        naming max_concurrent_requests when either is full; None where neither has a limit."""
        _, key_limits = limits_of(tenant)
        if tenant.is_admin or not any(self.concurrency.limits(tenant, key_limits)):
            return None
        try:
            slot = await self.call_redis("hold", lambda: self.concurrency.take(tenant, key_limits))
        except RedisUnavailable as unavailable:
            if self.config.on_redis_error == "closed" or isinstance(unavailable, RedisFull):
                raise OpenAIError(503, "rate-limit store unavailable; try again shortly",
                                  code="service_unavailable", headers={"Retry-After": "1"}) from None
            return self.concurrency.take_here(tenant, key_limits)
        self._open[slot.member] = slot
        self.slot_renewals.hold(slot.member, slot)
        return slot

    async def let_go(self, slot: Slot | None) -> None:
        """Give the place back; never raises (a slot Redis did not hear about lapses by itself)."""
        if slot is None:
            return
        if slot.local:
            await self.concurrency.give_back(slot)
            return
        self.slot_renewals.release(slot.member)
        self._open.pop(slot.member, None)
        try:
            await self.call_redis("let_go", lambda: self.concurrency.give_back(slot))
        except RedisUnavailable:
            pass

    async def _renew_slots(self, tenant: Tenant, members: list[str]) -> None:
        slots = [self._open[m] for m in members if m in self._open]
        await self.call_redis("renew_open", lambda: self.concurrency.renew(slots))

    # -- admission --------------------------------------------------------------------------------
    async def admit(self, tenant: Tenant, request_id: str, estimated_prompt_tokens: int, max_tokens: int, *,
                    n: int = 1, answers: int = 1, attempts: int = 1, tiers: Sequence[str] = (),
                    client_request_id: str | None = None, tags: Sequence[str] = ()) -> Admission:
        """Check and reserve the request's worst case: `answers` x (prompt + n x max_tokens) tokens
        for the token buckets and, `attempts` times over and priced at the dearest of `tiers`
        (every priced tier when empty), for the hard budgets (`answers`: 2 when a shape re-ask
        may bill a dropped answer too; `attempts`: each attempt of a failover may be billed what
        it generated). The gateway passes the prompt's upper bound (wire/prompt_bound.py) as
        `estimated_prompt_tokens`. `request_id` must be the server's own: it names the
        reservation, which is renewed while the request runs (renewal.py) and released by its
        settle."""
        periods = self.periods()
        self._member_seq += 1
        member = f"{request_id}:{os.getpid()}:{self._member_seq}"  # unique: a reused id cannot dodge the limit
        prompt, completion = max(0, int(estimated_prompt_tokens)), max(0, int(n)) * max(0, int(max_tokens))
        answers = max(1, int(answers))
        charge = answers * (prompt + completion)
        billable = answers * max(1, int(attempts))
        reservation = Reservation(request_id, billable * self._worst_cost(tiers, prompt, completion),
                                  int(self.access.reservation_ttl_s * 1000))
        admission = Admission(tenant, request_id, charge, max_tokens, True, client_request_id,
                              allowed_tags(tenant, tags))
        try:
            result = await self.call_redis("admit", lambda: self.store.admit(tenant, member, charge, periods,
                                                                         reservation))
        except RedisUnavailable as unavailable:
            if self.config.on_redis_error == "closed" or isinstance(unavailable, RedisFull):
                metrics.REDIS_UNAVAILABLE.labels("admit", "rejected_503").inc()
                raise OpenAIError(503, "rate-limit store unavailable; try again shortly",
                                  code="service_unavailable", headers={"Retry-After": "1"}) from None
            if holds_budget(tenant) and reservation.cost_micro and not self._spend_known(tenant):
                metrics.REDIS_UNAVAILABLE.labels("admit", "rejected_503").inc()
                raise OpenAIError(503, f"the spend of tenant {tenant.name!r} against its hard budget is in the "
                                       "rate-limit store, which this replica has not read yet and cannot reach; "
                                       "try again shortly", code="service_unavailable",
                                  headers={"Retry-After": "1"}) from None
            result = self.local.admit(tenant, limits_of(tenant), request_id, charge, reservation.cost_micro,
                                      (self.spent(tenant.name), self.spent(tenant.name, tenant.key_id)))
            metrics.REDIS_UNAVAILABLE.labels("admit", "local_limits").inc()
            if result.status != ADMITTED:
                raise refusal(tenant, result, self.clock(), self.week_start) from None
            # nothing was charged in Redis: a settle that reaches it charges the real usage in full
            return replace(admission, limited=False, charged_tokens=0)
        self._remember(tenant.name, None, periods, result.tenant_spend)
        if tenant.key_id and key_budgets_of(tenant).any:  # admit reads a key's spend only when it has budgets
            self._remember(tenant.name, tenant.key_id, periods, result.key_spend)
        if result.status != ADMITTED:
            raise refusal(tenant, result, self.clock(), self.week_start)
        if holds_budget(tenant) and reservation.cost_micro > 0:
            self.renewals.hold(request_id, admission)
        return admission

    async def _renew(self, tenant: Tenant, reservation_ids: list[str]) -> None:
        key_id = tenant.key_id if key_budgets_of(tenant).hard else None
        await self.call_redis("renew", lambda: self.store.renew(tenant.name, key_id, reservation_ids,
                                                                int(self.access.reservation_ttl_s * 1000)))

    def _worst_cost(self, tiers: Sequence[str], prompt: int, completion: int) -> int:
        if not prompt and not completion:
            return 0
        prices = [self._prices[t] for t in tiers if t in self._prices] or list(self._prices.values())
        return max((request_cost_micro(p, prompt, completion) for p in prices), default=0)

    # -- settlement -------------------------------------------------------------------------------
    async def settle(self, admission: Admission, request_id: str, tier_name: str,
                     prompt_tokens: int, completion_tokens: int, usage_source: str = "worker",
                     price: TierPrice | None = None, cascade: str | None = None) -> None:
        """Book the real usage once per request id and release the admission's reservation; never
        raises for Redis trouble (the log has it). 0 tokens (nothing served) books nothing.
        `price`: what these tokens cost instead of the tier's (an answer served from the cache);
        `cascade`: what the request's cascade came to (`outcome:reason`), for the usage log."""
        tenant = admission.tenant
        self.local.release(tenant.name, tenant.key_id, admission.request_id)
        self.renewals.release(admission.request_id)
        if not self.replica.first_settle(tenant.name, request_id):
            metrics.DUPLICATE_SETTLES.inc()
            return
        served = prompt_tokens > 0 or completion_tokens > 0
        if not served and (not admission.limited or not admission.charged_tokens):
            return  # nothing was served and nothing held in Redis: nothing to bill, log or release
        price = price or self._prices.get(tier_name)
        if price is None and served:
            raise ValueError(f"settle: unknown tier {tier_name!r}")
        periods = self.periods()
        record = UsageRecord(
            ts=round(time.time(), 3), request_id=request_id, tenant=tenant.name, key_id=tenant.key_id,
            tier=tier_name, prompt_tokens=int(prompt_tokens), completion_tokens=int(completion_tokens),
            cost_micro=request_cost_micro(price, int(prompt_tokens), int(completion_tokens)) if served else 0,
            day=periods.day, month=periods.month, week=periods.week, ledger="redis", client_request_id=admission.client_request_id,
            usage_source=usage_source, tags=admission.tags, cascade=cascade)
        token = os.urandom(8).hex()  # identifies this settle if redis-py retries it after a lost reply
        try:
            settled = await self.call_redis(
                "settle", lambda: self.store.settle(tenant, record, admission.charged_tokens, token,
                                                    admission.request_id))
        except RedisUnavailable:
            if not served:
                return  # the reservation expires by itself
            # The request was served: its spend is real. The log keeps it; rebuild-ledger books it.
            metrics.REDIS_UNAVAILABLE.labels("settle", "ledger_unconfirmed").inc()
            self.usage_log.append(UsageRecord(**{**record.__dict__, "ledger": "unconfirmed"}))
            self.replica.queue_pending(tenant, record, token)
            for key_id in (None, tenant.key_id) if tenant.key_id else (None,):
                if (tenant.name, key_id) not in self._spent:
                    continue  # never read: it stays unknown (admit refuses its hard budgets meanwhile)
                # local budgets see this spend until Redis is back
                seen = self.spent(tenant.name, key_id)
                self._remember(tenant.name, key_id, periods, Spend(*(seen.of(p) + record.cost_micro for p in PERIODS)))
            return
        self._remember(tenant.name, None, periods, settled.tenant)
        if tenant.key_id:
            self._remember(tenant.name, tenant.key_id, periods, settled.key)
        if not settled.counted:
            metrics.DUPLICATE_SETTLES.inc()
            return
        if served:
            self.usage_log.append(record)
            for tag in record.tags:
                metrics.TAG_SPEND.labels(tenant.name, tag).inc(micro_to_usd(record.cost_micro))
            await self._alert(tenant, periods, settled)
        if self.replica.pending:
            await self.replay_pending()

    async def _alert(self, tenant: Tenant, periods: Periods, settled: Any) -> None:
        """Budget thresholds this settle's spend (the tenant's and its key's) reached alert once
        (policies/alerts/); never fails the settle."""
        found = self.alerts.unasked(tenant, periods, settled.tenant, settled.key) if self.alerts is not None else ()
        if not found:
            return
        try:
            await self.call_redis("alert", lambda: self.alerts.fire(found))
        except RedisUnavailable:
            pass  # the next settle that reaches it asks again

    async def replay_pending(self, limit: int = 1000) -> int:
        """Book settles that happened while Redis was away. Safe to repeat: the settle script's
        idempotency marker skips any that did reach Redis before the connection broke."""
        booked = 0
        pending = self.replica.pending
        while pending and booked < limit:
            tenant, record, token = item = pending.popleft()  # popped first: concurrent replays share the queue
            try:  # same token: if the original attempt did reach Redis, this is a no-op
                await self.call_redis("replay", lambda: self.store.settle(
                    tenant, record, record.prompt_tokens + record.completion_tokens, token, record.request_id))
            except RedisUnavailable:
                pending.appendleft(item)
                break
            booked += 1
        return booked

    @property
    def pending_settles(self) -> int:
        return len(self.replica.pending)

    async def usage(self, tenant: Tenant, days: int = 7, by_tag: bool = False) -> dict:
        """The caller's own usage; the admin key gets every configured tenant (usage_report.py)."""
        return await usage_report(self, tenant, days, by_tag)

    def close(self) -> None:
        self.renewals.close()
        self.usage_log.close()


def build_service(policies: PoliciesConfig, redis: Any, tiers: Sequence[Any], *, access: RedisAccess,
                  embedding_tiers: Sequence[Any] = ()) -> PolicyService:
    """Entry point for gateway/policy_seam: a PolicyService for the validated `policy:`/`tenants:`
    sections, the tiers it routes and bills, and the gateway's Redis settings. Embedding tiers
    are billed but never routed to."""
    if redis is None:
        raise ConfigError.at(policies.source, "tenants", "need Redis (set redis.url or use the launcher)")
    return PolicyService(policies, redis, sorted(tiers, key=lambda t: t.level), access=access,
                         replica=replica_state(policies.usage_log), priced_only=embedding_tiers,
                         registry=registry_cache(redis, access.key_prefix, policies.key_sync_interval_s),
                         alerts=budget_alerts(redis, access.key_prefix, policies.alerts))
