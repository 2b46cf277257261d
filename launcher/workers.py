"""Which inference workers this machine must run for a gateway config, and how to start one."""
from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit

from gateway.config import ConfigError
from launcher.group import clean_env
from webwire.internal_key import WORKER_KEY_ENV, generated_key

LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def local_workers(config) -> dict[str, tuple[str, tuple[str, ...]]]:
    """url -> (model, launch flags) for the workers this machine must run; one model per URL."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for tier in (*config.tiers, *config.embedding_tiers):
        for spec in tier.workers:
            if urlsplit(spec.url).hostname not in LOCAL_HOSTS:
                continue
            wanted = (tier.model, spec.launch)
            if found.setdefault(spec.url, wanted) != wanted:
                raise ConfigError(f"{config.source}: {spec.url} is listed twice with different models or "
                                  f"launch flags ({found[spec.url]}, {wanted}); one worker serves one model")
    return found


def ensure_worker_key() -> str:
    """The workers' key of this machine's stack: TIERGATE_WORKER_KEY as exported, else a fresh one
    put in this process's environment, before a config naming it is read; the processes started
    from here (the launcher's workers and gateway) inherit it."""
    return os.environ.setdefault(WORKER_KEY_ENV, generated_key())


def worker_keys(config) -> dict[str, str | None]:
    """url -> the key the gateway sends there (its api_key_env's value): a launched worker's credential."""
    return {spec.url: spec.api_key for tier in (*config.tiers, *config.embedding_tiers) for spec in tier.workers}


def worker_env(key: str | None) -> dict[str, str]:
    """A launched worker's environment: the key its gateway sends, and no other worker key."""
    env = clean_env()
    env.pop(WORKER_KEY_ENV, None)
    return {**env, WORKER_KEY_ENV: key} if key else env


def worker_targets(config) -> list[str]:
    """host:port of every distinct worker URL in a gateway config, in config order."""
    return list(dict.fromkeys(urlsplit(spec.url).netloc for tier in (*config.tiers, *config.embedding_tiers)
                              for spec in tier.workers))


def threads_per_worker(count: int) -> int:
    """Several workers on one machine each get a share of the cores: OpenMP threads that
    outnumber the cores spin against each other and every worker slows down."""
    return max(1, (os.cpu_count() or 1) // count) if count else 1


def worker_command(model: str, port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "backends.worker", "--model", model, "--port", str(port), *flags]
