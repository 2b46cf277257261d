"""N real gateway processes (`python -m gateway.serve`) sharing one config and one Redis prefix,
in front of real fake-upstream processes, all on loopback. Requests go through aiohttp."""
from __future__ import annotations

import uuid
from pathlib import Path

import yaml

from policies.keys import hash_key
from launcher import commands
from launcher.group import ProcessGroup
from tests.support import SHARED_REDIS, delete_prefix, free_port

ADMIN_KEY = "sk-admin-" + uuid.uuid4().hex




def tenant_key(name: str) -> str:
    return f"sk-{name}-{uuid.uuid5(uuid.NAMESPACE_URL, ADMIN_KEY + name).hex}"


def replica_config(upstreams: list[str], prefix: str, log_dir: str, tenants: dict) -> dict:
    """Tier `small` spread over every upstream (so affinity has a choice), `large` on the first."""
    price = {"input": 1.0, "output": 2.0}
    tiers = [{"name": "small", "level": 1, "model": "m-small", "price_per_mtok": price,
              "workers": [{"url": u} for u in upstreams]},
             {"name": "large", "level": 2, "model": "m-large", "price_per_mtok": price,
              "workers": [{"url": upstreams[0]}]}]
    return {"tiers": tiers, "redis": {"url": SHARED_REDIS, "key_prefix": prefix},
            "timeouts": {"connect_s": 1.0, "read_s": 5.0},
            "affinity": {"chunk_chars": 64, "load_margin": 1000},  # affinity must win over load balance here
            "quality": {"enabled": True, "sampling_rate": 0.0, "window": 4, "min_samples": 4, "refresh_s": 0.2},
            "policy": {"admin_key_sha256": hash_key(ADMIN_KEY), "usage_log": {"dir": log_dir}},
            "tenants": {name: {"keys": [{"id": "k", "sha256": hash_key(tenant_key(name))}], **spec}
                        for name, spec in tenants.items()}}


class ReplicaStack:
    def __init__(self, tmp: Path, tenants: dict, replicas: int = 2, upstreams: int = 2):
        self.tmp, self.tenants, self.n_replicas, self.n_upstreams = tmp, tenants, replicas, upstreams
        self.prefix = f"tgchaos:{uuid.uuid4().hex[:10]}:"
        self.group = ProcessGroup(tmp)
        self.urls: list[str] = []
        self.upstreams: list[str] = []

    def start(self) -> "ReplicaStack":
        ports = [free_port() for _ in range(self.n_upstreams)]
        for i, port in enumerate(ports):
            self.group.spawn(f"upstream{i}", commands.fake_upstream(port))
            self.upstreams.append(f"http://127.0.0.1:{port}")
        config = self.tmp / "tiergate.yaml"
        config.write_text(yaml.safe_dump(replica_config(self.upstreams, self.prefix, str(self.tmp / "usage"),
                                                        self.tenants)))
        for i in range(self.n_replicas):
            port = free_port()
            self.group.spawn(f"gateway{i}", commands.gateway_serve(config, port))
            self.urls.append(f"http://127.0.0.1:{port}")
            ports.append(port)
        for port in ports:
            self.group.wait_port(port)
        return self

    def stop(self) -> None:
        self.group.stop()
        delete_prefix(self.prefix)
