"""A throwaway stack for `python -m benchmarks.load --self-contained`: fake upstream processes
(one per tier, with per-token latency) and a real `python -m gateway.process` with two tenants,
on loopback and the shared Redis under a unique prefix (deleted on stop)."""
from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import yaml

from launcher import commands
from launcher.group import ProcessGroup
from launcher.processes import SHARED_REDIS, delete_prefix, free_port
from policies.keys import hash_key

TIERS = [("small", 1, 0.1, 0.2), ("medium", 2, 0.5, 1.5), ("large", 3, 2.5, 10.0), ("expert", 4, 10.0, 30.0)]


class SelfContainedStack:
    def __init__(self, chunks: int = 16, chunk_delay_s: float = 0.005):
        self.chunks, self.chunk_delay_s = chunks, chunk_delay_s
        self.prefix = f"tgload:{uuid.uuid4().hex[:10]}:"
        self.keys = [f"sk-load-{name}-{uuid.uuid4().hex}" for name in ("alpha", "beta")]
        self.tmp = tempfile.TemporaryDirectory(prefix="tiergate-load-")
        self.group = ProcessGroup(Path(self.tmp.name))

    def start(self) -> str:
        ports, tiers = [], []
        for name, level, price_in, price_out in TIERS:
            port = free_port()
            self.group.spawn(f"upstream-{name}", commands.fake_upstream(port, "--chunks", str(self.chunks),
                                                                        "--chunk-delay", str(self.chunk_delay_s)))
            ports.append(port)
            tiers.append({"name": name, "level": level, "model": f"fake-{name}",
                          "price_per_mtok": {"input": price_in, "output": price_out},
                          "workers": [{"url": f"http://127.0.0.1:{port}"}]})
        unlimited = {"requests_per_minute": 10**7, "tokens_per_minute": 10**10}
        doc = {"tiers": tiers, "redis": {"url": SHARED_REDIS, "key_prefix": self.prefix},
               "policy": {"usage_log": {"dir": str(Path(self.tmp.name) / "usage")}},
               "tenants": {f"t{i}": {"keys": [{"id": "k", "sha256": hash_key(key)}], "rate_limits": unlimited}
                           for i, key in enumerate(self.keys)}}
        config = Path(self.tmp.name) / "tiergate.yaml"
        config.write_text(yaml.safe_dump(doc))
        port = free_port()
        self.group.spawn("gateway", commands.gateway_serve(config, port))
        for p in ports + [port]:
            self.group.wait_port(p)
        return f"http://127.0.0.1:{port}"

    @property
    def procs(self):
        return self.group.procs

    def stop(self) -> None:
        self.group.stop()
        delete_prefix(self.prefix)
        self.tmp.cleanup()
