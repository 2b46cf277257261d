"""Everything one gateway process holds and runs in the background: Redis, the HTTP session,
health checks, config reload, and the `Services` snapshot every surface is handed.

Reload builds new pools and policy and publishes a new snapshot; the app takes `state.services`
once per request (core/services.py's `SERVICES`) and in-flight requests keep their Backend
objects, so nothing in flight is dropped. A config that fails validation is rejected and the old
one kept. Only the app and the process module import this module (tests/layers).
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import replace

import aiohttp
from aiohttp import web

from .cache.identity import tier_identities
from .cache.store import CacheStore
from .core.affinity import AffinityIndex
from .core.classify import Classifier, ClassifierSlot, load_classifier
from .config import Config, ConfigError, load_config
from .console.activity import ActivityLog
from .core.metrics import METRICS
from .core.policy_seam import build_policy_service
from .core.pool import Pools
from .quality.monitor import QualityMonitor
from .server.redis_conn import connect, effective_url
from .server.shutdown import finish_within
from .core.tier_capabilities import by_tier, probe_health, read_card
from .core.trace_spans import warn_if_changed
from .core.services import Services, assemble
from .core.transport import Transport, http_transport
from .core.upstream import open_upstream

log = logging.getLogger(__name__)


class GatewayState:
    def __init__(self, config: Config, config_path: str | None = None, classifier: Classifier | None = None,
                 policy_factory=build_policy_service, transport: Transport | None = None):
        """`transport`: what every outbound call goes through; by default the HTTP session's, built
        at start (in-process tests hand a scripted one, tests/support/scripted_transport.py)."""
        self.policy_factory = policy_factory
        self.given_transport = transport
        self.config_path = config_path
        self.keys_required = False  # bound to a reachable address with tenants: a reload must keep them
        self.classifiers = ClassifierSlot(classifier or load_classifier())  # the hot-swapper replaces it
        self.redis = None
        self.session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task] = []
        self._started: list = []  # the policy's process-wide parts whose tasks run (registry, alerts)
        self._config_mtime = self._mtime()
        # the quality monitor reads the config as it is built, and the services hold the monitor
        self.services = assemble(config, self.classifiers, None, self._transport(config))
        self.quality = QualityMonitor(lambda: self.services.config, self.classifiers, self._open_upstream)
        self._publish(config, self.services.upstreams.pools)

    def _publish(self, config: Config, pools: Pools, policy=None, affinity: AffinityIndex | None = None,
                 activity: ActivityLog | None = None, cache_store: CacheStore | None = None) -> None:
        """A new snapshot from the parts given and the current ones; capabilities and model
        identities are read from the pools' workers' cards again."""
        now = self.services
        policy = now.sinks.policy if policy is None else policy
        transport = self._transport(config)
        self.services = Services(
            config, replace(now.router, policy=policy, capabilities=by_tier(config, pools), quality=self.quality),
            replace(now.upstreams, pools=pools, affinity=affinity or now.upstreams.affinity, post=transport.post),
            replace(now.sinks, policy=policy, activity=activity or now.sinks.activity, quality=self.quality),
            replace(now.cache, settings=config.cache, store=cache_store or now.cache.store,
                    identities=tier_identities(config, pools)),
            transport, self.redis)

    def _open_upstream(self, config: Config, ask):
        """The quality monitor's re-asks go through the upstreams current when they run."""
        return open_upstream(self.services.upstreams, config, ask)

    def _transport(self, config: Config) -> Transport:
        if self.given_transport is not None:
            return self.given_transport
        return http_transport(self.session, config.timeouts.connect_s, config.timeouts.read_s)

    def _mtime(self) -> float | None:
        try:
            return os.stat(self.config_path).st_mtime if self.config_path else None
        except OSError:
            return None

    async def start(self) -> None:
        config = self.services.config
        self.redis = connect(config.redis, effective_url(config.redis.url))
        if self.redis is None:
            log.warning("no Redis URL: prefix affinity is off (the launcher normally provides one)")
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30, ttl_dns_cache=300)
        # no cookie jar: workers set none, and one tenant's request must never carry another's cookies
        self.session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                             cookie_jar=aiohttp.DummyCookieJar())
        with_redis = self.redis is not None
        self._publish(config, self.services.upstreams.pools, self.policy_factory(config, self.redis),
                      AffinityIndex(self.redis) if with_redis else None,
                      ActivityLog(self.redis, config.redis.key_prefix, config.console) if with_redis else None,
                      CacheStore(self.redis) if with_redis else None)
        await self._start_policy_tasks()
        await self.quality.start(self.redis)  # loads the scoring model before any traffic or health check
        # cards before serving: a request with `tools` must not meet capabilities not yet read
        # (health itself stays optimistic until the loop's first check, as before)
        await self._read_cards(list(self.services.upstreams.pools.backends.values()))
        self._tasks.append(asyncio.create_task(self._health_loop()))
        if self.services.sinks.activity.enabled:
            self._tasks.append(asyncio.create_task(self.services.sinks.activity.run()))
        if self.redis is not None:
            self._tasks.append(asyncio.create_task(self._replay_settles()))
        if self.config_path:
            self._tasks.append(asyncio.create_task(self._watch_config()))
            try:
                asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.reload)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass

    async def _start_policy_tasks(self) -> None:
        """The API-managed tenants and keys (read whole before serving, then followed) and the
        budget alerts' delivery: once per process each (a reload's policy shares the same ones)."""
        policy = self.services.sinks.policy
        registry, alerts = getattr(policy, "registry", None), getattr(policy, "alerts", None)
        if registry is not None and registry not in self._started:
            self._started.append(registry)
            try:
                await registry.load()
            except Exception as exc:  # Redis away at start: the config's keys serve; the follower catches up
                log.warning("API-managed tenants and keys not read at start: %s: %s", type(exc).__name__, exc)
            self._tasks.append(asyncio.create_task(registry.follow()))
        if alerts is not None and alerts not in self._started:
            self._started.append(alerts)
            self._tasks.append(asyncio.create_task(alerts.deliver_forever()))

    async def stop(self) -> None:
        await finish_within("the quality monitor", self.quality.stop())
        for task in self._tasks:
            task.cancel()
        await finish_within("the background tasks", asyncio.gather(*self._tasks, return_exceptions=True))
        await finish_within("the affinity writes", self.services.upstreams.affinity.drain())
        await finish_within("the console's last flush", self.services.sinks.activity.drain())
        await finish_within("the response cache's writes", self.services.cache.writes.drain())
        if self.session:
            await self.session.close()
        if self.redis is not None:
            await self.redis.aclose()

    async def _replay_settles(self, interval_s: float = 1.0) -> None:
        """Settles that met a Redis outage are booked once Redis is back, not only when the next
        request settles (after a batch, there may be none for a long time)."""
        while True:
            await asyncio.sleep(interval_s)
            if getattr(self.services.sinks.policy, "pending_settles", 0):
                try:
                    await self.services.sinks.policy.replay_pending()
                except Exception as exc:  # still down: the next round tries again
                    log.warning("replaying queued settles: %s", exc)

    # --- reload -------------------------------------------------------------------------

    def reload(self) -> bool:
        try:
            new = load_config(self.config_path)
            if self.keys_required and not new.policies.keyed:
                raise ConfigError(f"{self.config_path}: no `tenants:`, and this gateway listens on a "
                                  "reachable address: without them every endpoint would be open")
            policy = self.policy_factory(new, self.redis)
        except (ConfigError, RuntimeError) as exc:
            METRICS.reloads.labels("rejected").inc()
            log.error("config reload rejected, keeping the running config: %s", exc)
            return False
        warn_if_changed(self.services.config.tracing, new.tracing)
        self._publish(new, Pools(new, self.services.upstreams.pools), policy)
        if self.session is not None:  # started: begin the new policy's tasks (start() does it otherwise)
            self._tasks.append(asyncio.create_task(self._start_policy_tasks()))  # new ones only (a new prefix)
        self.quality.configure(new.quality)
        self.services.sinks.activity.settings = new.console
        METRICS.reloads.labels("applied").inc()
        log.info("config reloaded from %s", self.config_path)
        return True

    async def _watch_config(self, interval_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            mtime = self._mtime()
            if mtime is not None and mtime != self._config_mtime:
                self._config_mtime = mtime
                self.reload()

    # --- active health checks -----------------------------------------------------------

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.services.config.health.interval_s)
            await self._health_round()

    async def _health_round(self) -> None:
        backends = list(self.services.upstreams.pools.backends.values())
        await asyncio.gather(*(self._check(b) for b in backends))
        now = time.monotonic()
        for b in backends:
            METRICS.backend_up.labels(b.label).set(1 if b.available(now) else 0)
        await self._read_cards([b for b in backends if b.healthy and b.capabilities is None])

    async def _read_cards(self, backends) -> None:
        """What each worker states it can do; one that did not answer is asked again next round."""
        services = self.services
        cards = await asyncio.gather(*(read_card(services.transport, b, services.config.health.timeout_s)
                                       for b in backends))
        for b, card in zip(backends, cards):
            b.capabilities, b.identity = card if card is not None else (None, None)
        self._publish(self.services.config, self.services.upstreams.pools)

    async def _check(self, backend) -> None:
        health = self.services.config.health
        heard = await probe_health(self.services.transport, backend, health.timeout_s)
        healthy = backend.after_check(heard, health.silent_checks)
        if healthy != backend.healthy:
            log.warning("backend %s is now %s", backend.url, "healthy" if healthy else "unhealthy")
        backend.healthy = healthy
        if not healthy:
            backend.capabilities = backend.identity = None  # read again when it is back: it may be another build


# where the aiohttp app holds the process state (app.py sets it; handlers read it)
STATE = web.AppKey("tiergate_state", GatewayState)
