"""Command lines of the processes a stack is made of (the workers': launcher.workers)."""
from __future__ import annotations

import sys


def gateway_serve(config, port: int, host: str = "127.0.0.1") -> list[str]:
    """One gateway process (no supervisor, no embedded Redis)."""
    return [sys.executable, "-m", "gateway.process", "--config", str(config), "--host", host, "--port", str(port)]


def gateway_processes(config, port: int, workers: int | None = None, host: str = "127.0.0.1",
                      redis_url: str | None = None) -> list[str]:
    """`python -m gateway`: N gateway processes on one port with shared metrics."""
    return ([sys.executable, "-m", "gateway", "--config", str(config), "--host", host, "--port", str(port)]
            + (["--workers", str(workers)] if workers else []) + (["--redis-url", redis_url] if redis_url else []))


def otlp_sink(port: int) -> list[str]:
    return [sys.executable, "-m", "launcher.otlp_sink", "--port", str(port)]


def fake_upstream(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "launcher.fake_upstream", "--port", str(port), *flags]
