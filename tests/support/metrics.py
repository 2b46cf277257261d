"""Reading Prometheus figures in tests: a server's /metrics page, or this process's own registry
(where gateways started in-process by the `gateway` fixture count), and one figure off a page."""
from __future__ import annotations

import urllib.request

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families


def scrape(base_url: str, timeout_s: float = 10, key: str | None = None) -> str:
    """The /metrics page of the server at base_url (blocking: not for a server in this event loop);
    per-tenant series are on it only for the admin `key` where tenants are configured."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(base_url + "/metrics", headers=headers),
                                timeout=timeout_s) as response:
        return response.read().decode()


def in_process_page() -> str:
    """The page this process would serve: the default registry, where in-process gateways count."""
    return generate_latest(REGISTRY).decode()


def samples(page: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample called `name` (with its _total/_bucket/... suffix) on a page."""
    return [(s.labels, s.value) for family in text_string_to_metric_families(page) for s in family.samples
            if s.name == name]


def metric(page: str, name: str, default: float | None = None, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels`. With none, `default`
    when given (a labelled counter has no sample before its first count), else an AssertionError:
    a renamed metric must not read as 0."""
    found = [value for have, value in samples(page, name) if all(have.get(k) == str(v) for k, v in labels.items())]
    if found:
        return sum(found)
    if default is None:
        raise AssertionError(f"no sample {name}{labels or ''} on the page")
    return default
