"""Upstream workers and the per-tier pools that pick among them.

A Backend is one upstream URL, shared by every tier that lists it (so its in-flight count
and health are one truth). Eligibility = active health check says up AND the circuit
breaker allows: closed, or half-open with no probe in flight.
Load counts are per gateway process; the affinity index is the part shared through Redis.
A Backend also carries the headers every call to it sends: the upstream's own API key
(`Authorization: Bearer`, from the config's api_key_env), never a client's.
Its `label` (headers, metrics, errors a tenant reads) is a name, `<first tier>-<n>`: the worker's
URL and host:port (`address`) are shown only to the admin key, in logs and in traces.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from yarl import URL

from ..config import Breaker, Config


UP, DOWN, SILENT = "up", "down", "silent"  # what one health check heard (tier_capabilities.probe_health)


class Backend:
    __slots__ = ("url", "label", "address", "outstanding", "healthy", "failures", "open_until", "probing", "auth_headers",
                 "capabilities", "identity", "_urls", "silent_checks")

    def __init__(self, url: str, api_key: str | None = None, name: str = "worker"):
        self.url = url
        self.set_key(api_key)
        parts = urlsplit(url)
        self.address = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
        self.label = name
        self.outstanding = 0
        self.healthy = True  # optimistic until the first health check says otherwise
        self.silent_checks = 0  # health checks in a row without an answer, and no request answered since
        self.failures = 0
        self.open_until = 0.0  # breaker open while now < open_until; half-open after
        self.probing = False
        self.capabilities = None  # what its /v1/models card states; None until read (and after it went down)
        self.identity = None  # the model identity its card states (cache/identity.py); None until read
        self._urls: dict[str, URL] = {}

    def url_for(self, path: str) -> URL:
        """The URL of one of its endpoints, parsed once: aiohttp would parse a string on every call."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = URL(self.url + path)
        return url

    def set_key(self, api_key: str | None) -> None:
        self.auth_headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def __repr__(self) -> str:  # never the key
        return f"Backend({self.label}, {self.address})"

    def breaker_state(self, now: float) -> str:
        if self.open_until == 0.0:
            return "closed"
        return "open" if now < self.open_until else "half-open"

    def available(self, now: float) -> bool:
        if not self.healthy:
            return False
        state = self.breaker_state(now)
        return state == "closed" or (state == "half-open" and not self.probing)

    def on_pick(self, now: float) -> None:
        self.outstanding += 1
        if self.breaker_state(now) == "half-open":
            self.probing = True  # this request is the one trial that may close the breaker

    def on_done(self) -> None:
        self.outstanding -= 1

    def after_check(self, heard: str, silent_limit: int) -> bool:
        """Whether it is healthy after a health check. A status or a refused connection decides at
        once; silence only after `silent_limit` checks in a row with no request answered meanwhile:
        a worker answering requests whose /health is slow (a busy machine) is busy, not gone, and
        taking it out would refuse requests that were already admitted and counted."""
        if heard != SILENT:
            self.silent_checks = 0
            return heard == UP
        self.silent_checks += 1
        return self.healthy and self.silent_checks < silent_limit

    def on_success(self) -> None:
        self.silent_checks = 0  # it answered: whatever its /health says by silence, it is there
        self.failures = 0
        self.open_until = 0.0
        self.probing = False

    def on_failure(self, now: float, breaker: Breaker) -> None:
        self.failures += 1
        self.probing = False
        if self.failures >= breaker.failure_threshold:
            self.open_until = now + breaker.open_s


@dataclass
class Pick:
    backend: Backend
    affinity: str  # "hit", "miss", "overloaded" (affine worker too busy) or "none" (no index entry)


class TierPool:
    def __init__(self, tier_name: str, backends: list[Backend]):
        self.tier_name = tier_name
        self.backends = backends
        self._turn = 0  # rotates the tie-break so idle workers share light load

    def pick(self, exclude: set[str], preferred: str | None, margin: int) -> Pick | None:
        now = time.monotonic()
        candidates = [b for b in self.backends if b.url not in exclude and b.available(now)]
        if not candidates:
            return None
        self._turn = (self._turn + 1) % len(candidates)
        rotated = candidates[self._turn:] + candidates[:self._turn]
        least = min(rotated, key=lambda b: b.outstanding)
        if preferred is None:
            return Pick(least, "none")
        affine = next((b for b in candidates if b.url == preferred), None)
        if affine is None:
            return Pick(least, "miss")
        if affine.outstanding > least.outstanding + margin:
            return Pick(least, "overloaded")
        return Pick(affine, "hit")


class Pools:
    """All tiers' pools; rebuilt on reload, reusing Backend objects for URLs that stay."""

    def __init__(self, config: Config, previous: "Pools | None" = None):
        known = previous.backends if previous else {}
        self.backends: dict[str, Backend] = {}
        self.by_tier: dict[str, TierPool] = {}
        for tier in (*config.tiers, *config.embedding_tiers):
            members = []
            for number, spec in enumerate(tier.workers, start=1):
                backend = self.backends.get(spec.url)
                if backend is None:  # named after the first tier listing it, in this config
                    backend = known.get(spec.url) or Backend(spec.url)
                    backend.label = f"{tier.name}-{number}"
                backend.set_key(spec.api_key)  # a reload may carry a new key for a URL that stays
                self.backends[spec.url] = backend
                members.append(backend)
            self.by_tier[tier.name] = TierPool(tier.name, members)
