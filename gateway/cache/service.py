"""The exact response cache as the request path uses it: `plan` (may this request be served or
kept, under which key and scope), `lookup` and `keep`. A Redis failure is a miss, never a
failed request; answers are written after they were delivered, by a bounded set of tasks."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from policies.cache_policy import CachePolicy, SemanticCachePolicy
from wire.errors import bad_request
from wire.model_identity import IDENTITY_HEADER

from ..core.metrics import METRICS
from ..core.request import GatewayRequest
from .config import CacheConfig
from .controls import Controls
from .entry import Entry, Recorder, one_line
from .key import cache_key, context_key
from .semantic import Probe, SemanticCache
from .store import CacheStore

log = logging.getLogger(__name__)
HIT, SEMANTIC, MISS, BYPASS = "hit", "semantic", "miss", "bypass"
CACHED_KINDS = ("chat", "completion")


@dataclass(frozen=True, slots=True)
class Plan:
    """What the cache does for one request; `key` is None for a bypass."""
    scope: str
    key: str | None = None
    read: bool = False
    write: bool = False
    ttl_s: int = 0
    max_age_s: int | None = None
    quota: int = 0
    semantic: SemanticCachePolicy | None = None  # the tenant's, where it has the semantic cache on
    identity: str = ""


@dataclass(frozen=True, slots=True)
class Found:
    """What a lookup found: the entry to serve and how (hit or semantic), and the prompt as the
    semantic index files it (to remember a fresh answer by)."""
    entry: Entry | None = None
    result: str | None = None
    probe: Probe | None = None


NOT_FOUND = Found()


class PendingWrites:
    """The cache writes in flight in this process, at most `limit` (past it an answer is not kept)."""

    def __init__(self):
        self.tasks: set[asyncio.Task] = set()

    def start(self, write, limit: int) -> bool:
        if len(self.tasks) >= limit:
            return False
        task = asyncio.get_running_loop().create_task(write)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return True

    async def drain(self) -> None:
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


def tenant_cache(request: GatewayRequest) -> tuple[CachePolicy, int]:
    """The tenant's cache policy and byte quota (the policy defaults for a tenant without one)."""
    policy = getattr(request.tenant, "policy", None) or request.config.policies.defaults
    return policy.cache, policy.storage.cache_bytes


def deterministic(request: GatewayRequest) -> bool:
    params = request.parsed.params
    return params.temperature == 0 or params.seed is not None


def _as_carded(opened) -> bool:
    """Whether the answer's worker is the model its card said (the identity every answer of our
    workers names). One that is not was restarted as another build: its card is read again at
    the next health round, and its answer is not kept under the old identity's key."""
    said = opened.response.headers.get(IDENTITY_HEADER)
    if said is None or said == opened.backend.identity:
        return True  # a foreign upstream names none: its tier's config version stands for it
    opened.backend.capabilities = opened.backend.identity = None
    return False


def _refuse(why: str) -> None:
    raise bad_request(why, param="cache.mode", code="cache_unavailable")


@dataclass(frozen=True, slots=True)
class ResponseCache:
    settings: CacheConfig
    store: CacheStore | None    # None: no Redis, no cache
    identities: dict[str, str]  # tier -> model identity (cache/identity.py)
    writes: PendingWrites
    semantic: SemanticCache     # the process's semantic index and each tenant's similarity bar

    def plan(self, request: GatewayRequest, controls: Controls) -> Plan | None:
        """None where the cache is not in use (off on this gateway, embeddings); a bypass plan
        for a request it does not serve; a 400 for a request that asks what it cannot have."""
        if not self.settings.enabled or self.store is None or request.kind not in CACHED_KINDS:
            if controls.asks:
                _refuse("the response cache is not enabled on this gateway" if request.kind in CACHED_KINDS
                        else "the response cache serves chat and completions only")
            return None
        policy, quota = tenant_cache(request)
        scope = self.settings.scope_of(request.tenant.name)
        if policy.mode == "off":
            if controls.asks:
                _refuse(f"the response cache is off for tenant {request.tenant.name!r}")
            return Plan(scope)
        if controls.ttl_s is not None and controls.ttl_s > policy.max_ttl_s:
            raise bad_request(f"'cache.ttl_s' may be at most {policy.max_ttl_s} for this tenant", param="cache.ttl_s",
                              code="invalid_value")
        wanted = controls.asks or (controls.mode is None and policy.mode == "deterministic" and deterministic(request))
        if not wanted or (controls.no_cache and controls.no_store):
            return Plan(scope)
        identity = self.identities.get(request.route.tier.name, "")
        return Plan(scope, cache_key(request, identity), read=not controls.no_cache, write=not controls.no_store,
                    ttl_s=controls.ttl_s or policy.ttl_s, max_age_s=controls.max_age_s, quota=quota,
                    semantic=policy.semantic if policy.semantic.enabled else None, identity=identity)

    async def find(self, request: GatewayRequest, plan: Plan) -> Found:
        """The exact entry; failing that, for a tenant with the semantic cache on, a similar
        prompt's (semantic.py)."""
        entry = await self.lookup(request, plan, plan.key) if plan.read else None
        if entry is not None:
            return Found(entry, HIT)
        if plan.semantic is None:
            return NOT_FOUND
        try:
            probe = self.semantic.probe(request.kind, request.body, context_key(request, plan.identity))
        except Exception as exc:  # noqa: BLE001 - the router's vectors unreadable: the exact cache still works
            log.warning("semantic cache unavailable: %s", exc)
            return NOT_FOUND
        if probe is None or not plan.read:
            return Found(probe=probe)
        for _, key in self.semantic.candidates(plan.scope, request.tenant.name, probe, plan.semantic):
            entry = await self.lookup(request, plan, key)
            if entry is not None:
                self.semantic.index.touch(plan.scope, key)
                return Found(entry, SEMANTIC, probe)
            self.semantic.index.forget(plan.scope, key)  # expired, evicted or cleared from the store
        return Found(probe=probe)

    async def lookup(self, request: GatewayRequest, plan: Plan, key: str) -> Entry | None:
        """The entry to serve, or None; Redis trouble is a miss."""
        try:
            raw = await self.store.get(request.config.redis.key_prefix, plan.scope, key)
            entry = Entry.decode(raw) if raw is not None else None
        except Exception as exc:  # noqa: BLE001 - any Redis or decoding failure: generate instead
            METRICS.redis_errors.labels("cache_get").inc()
            log.warning("response cache read failed: %s", exc)
            return None
        if entry is None or (plan.max_age_s is not None and entry.age_s() > plan.max_age_s):
            return None
        return entry

    def keep(self, request: GatewayRequest, plan: Plan, outcome, recorder: Recorder | None,
             probe: Probe | None = None) -> str | None:
        """Write a complete answer of the planned tier after it was delivered; what came of it
        (None: nothing to keep)."""
        entry = self._entry(request, outcome, recorder)
        if entry is None:
            return None
        if not _as_carded(outcome.opened):
            return "stale_identity"
        value = entry.encode()
        if len(value) > self.settings.max_entry_bytes:
            return "too_large"
        write = self._write(request, plan, value, probe)
        if not self.writes.start(write, self.settings.max_pending_writes):
            write.close()
            return "queue_full"
        return "stored"

    def _entry(self, request: GatewayRequest, outcome, recorder: Recorder | None) -> Entry | None:
        """The answer as an entry: only one the route's own tier served whole, first time, without error
        (a stream its worker finished is whole even if the client left as its last bytes went)."""
        finished = outcome.error is None or (outcome.stream and not outcome.cut)
        if (not finished or outcome.cut or outcome.stream_error or outcome.other_attempts or outcome.opened is None or outcome.served.name != request.route.tier.name
                or outcome.opened.response.status != 200):
            return None
        if outcome.stream:
            if recorder is None or recorder.overflow or not recorder.payloads:
                return None
            payloads = tuple(one_line(p) for p in recorder.payloads)
        else:
            payloads = (one_line(outcome.opened.body),)
        usage = outcome.usage
        return Entry(request.kind, outcome.stream, request.route.tier.name, usage.prompt_tokens,
                     usage.completion_tokens, int(time.time() * 1000), payloads)

    async def _write(self, request: GatewayRequest, plan: Plan, value: bytes, probe: Probe | None) -> None:
        try:
            stored, _, evicted = await self.store.put(request.config.redis.key_prefix, plan.scope, plan.key, value,
                                                      plan.ttl_s, plan.quota, request.route.tier.name)
        except Exception as exc:  # noqa: BLE001 - the answer already left; the next one may be kept
            METRICS.redis_errors.labels("cache_put").inc()
            log.warning("response cache write failed: %s", exc)
            return
        tier = request.route.tier.name
        if evicted:
            METRICS.cache.labels(request.tenant.name, tier, "evicted").inc(evicted)
        if not stored:
            METRICS.cache.labels(request.tenant.name, tier, "too_large").inc()
        elif probe is not None and plan.semantic is not None:
            self.semantic.remember(plan.scope, plan.key, probe, tier, plan.semantic)
