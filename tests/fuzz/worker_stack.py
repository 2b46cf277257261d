"""A real gateway process in front of two real SmolLM2 workers, one per tier, with two tenants:
`fuzz` (no practical limit) and `noisy` (a request rate it will spend). For hostile input that
must reach real engines, and for the flood test."""
from __future__ import annotations

import uuid

import yaml

from launcher import commands
from launcher.workers import worker_command
from policies.keys import hash_key
from tests.fuzz.live_stack import ADMIN_KEY, BODY_LIMIT, TENANT_KEY, LiveStack
from tests.support import SHARED_REDIS, free_port

MODEL = "smollm2-135m"
NOISY_KEY = "sk-noisy-" + uuid.uuid4().hex
NOISY_RPM = 200
TIERS = ("small", "large")
CONTEXT = 1024


def stack_config(worker_urls: list[str], prefix: str, log_dir: str) -> dict:
    tiers = [{"name": name, "level": level, "model": MODEL, "price_per_mtok": {"input": 0.1, "output": 0.2},
              "workers": [{"url": url}]} for level, (name, url) in enumerate(zip(TIERS, worker_urls), start=1)]
    unlimited = {"requests_per_minute": 100000, "tokens_per_minute": 10**9}
    return {"tiers": tiers, "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
            "health": {"interval_s": 0.5, "timeout_s": 2.0},
            "timeouts": {"connect_s": 1.0, "read_s": 60.0}, "limits": {"max_body_bytes": BODY_LIMIT},
            "policy": {"admin_key_sha256": hash_key(ADMIN_KEY), "usage_log": {"dir": log_dir},
                       "defaults": {"rate_limits": unlimited}},
            "tenants": {"fuzz": {"keys": [{"id": "main", "sha256": hash_key(TENANT_KEY)}]},
                        "noisy": {"keys": [{"id": "main", "sha256": hash_key(NOISY_KEY)}],
                                  "rate_limits": {"requests_per_minute": NOISY_RPM, "tokens_per_minute": 10**9}}}}


class WorkerStack(LiveStack):
    def start(self) -> "WorkerStack":
        ports = [free_port() for _ in TIERS]
        self.worker_urls = [f"http://127.0.0.1:{port}" for port in ports]
        workers = [self.group.spawn(f"worker-{port}", worker_command(MODEL, port, "--kv-cache-gb", "0.25",
                                                                     "--max-model-len", str(CONTEXT)))
                   for port in ports]
        for url, proc in zip(self.worker_urls, workers):
            self.group.wait_healthy(url, proc)
        config = self.tmp / "tiergate.yaml"
        config.write_text(yaml.safe_dump(stack_config(self.worker_urls, self.prefix, str(self.tmp / "usage"))))
        self.gateway = self.group.spawn("gateway", commands.gateway_serve(config, self.port))
        self.group.wait_healthy(f"http://127.0.0.1:{self.port}", self.gateway, 60)
        return self

    def worker_request(self, index: int, body: bytes, timeout: float = 60.0):
        """POST body straight to worker `index`'s chat endpoint (the worker's own boundary). The timeout
        matches the gateway's read timeout: a 128-token structured answer on a loaded CI core is slow."""
        port = int(self.worker_urls[index].rsplit(":", 1)[1])
        return self.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"},
                            timeout=timeout, port=port)

    def breakers(self) -> dict:
        """Each worker's health and breaker as the gateway sees them (the admin key's view of /health)."""
        return self.request("GET", "/health", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()["backends"]

    def all_closed(self) -> bool:
        return all(b["healthy"] and b["breaker"] == "closed" for b in self.breakers().values())
