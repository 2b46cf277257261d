"""What one request is served with, whatever surface it came to: the config, the two services
built from it (the `Router` and the `Upstreams`), the `Sinks` that conclude() reports to (the
policy, the console's activity, the quality monitor), the response cache, the process's Redis
and the transport. A frozen snapshot: the process (state.py) swaps it whole on a reload or a new
worker card; the app takes it once per request, on arrival (`SERVICES`), and every handler reads
that one."""
from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from ..cache.identity import tier_identities
from ..cache.semantic import SemanticCache
from ..cache.service import PendingWrites, ResponseCache
from ..cache.store import CacheStore
from .affinity import AffinityIndex
from .classify import ClassifierSlot
from .conclude import Sinks
from ..config import Config
from ..console.activity import ActivityLog
from .policy_seam import PolicyService
from .pool import Pools
from .retry_budget import RetryBudget
from .routing import QualityShift, Router
from .tier_capabilities import by_tier
from .transport import Transport
from .upstream import Upstreams


@dataclass(frozen=True, slots=True)
class Services:
    config: Config
    router: Router
    upstreams: Upstreams
    sinks: Sinks  # the policy (admit, settle), the console's counters, the quality monitor
    cache: ResponseCache  # the exact response cache, with each tier's model identity
    transport: Transport
    redis: object | None  # the process's client; None where no Redis is configured


def assemble(config: Config, classifiers: ClassifierSlot, quality: QualityShift, transport: Transport,
             policy: PolicyService | None = None, redis=None) -> Services:
    """The services for `config`, new pools included; the process (state.py) builds its first
    snapshot here, and in-process tests build theirs the same way around a scripted transport."""
    pools = Pools(config)
    return Services(config, Router(classifiers, policy, by_tier(config, pools), quality),
                    Upstreams(pools, AffinityIndex(redis), RetryBudget(), transport.post),
                    Sinks(policy, ActivityLog(redis, config.redis.key_prefix, config.console), quality),
                    ResponseCache(config.cache, CacheStore(redis) if redis is not None else None,
                                  tier_identities(config, pools), PendingWrites(), SemanticCache()),
                    transport, redis)


# where a request holds the snapshot it was served with (app.py's middleware takes it on arrival)
SERVICES = web.RequestKey("tiergate_services", Services)
