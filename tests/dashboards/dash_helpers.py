"""Shared by the dashboard tests: the dashboard files, /metrics parsing, a real Prometheus."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support import stop_processes, wait_for

ROOT = Path(__file__).parents[2]

DASHBOARD_DIR = ROOT / "dashboards" / "grafana"
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$tenant": ".*", "$tier": ".*",
                     "$worker": ".*"}
_DERIVED = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("", "_sum", "_count", "_created"), "gaugehistogram": ("_bucket", "_gsum", "_gcount")}


def dashboards() -> dict[str, dict]:
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARD_DIR.glob("*.json"))}


def exposed_names(text: str) -> set[str]:
    """Every series name a /metrics page exposes, including declared families with no sample yet."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in _DERIVED.get(family.type, ("",)))
    return names


def substitute(expr: str, range_s: int) -> str:
    """A dashboard expression as Grafana sends it, with All selected and $__range = range_s."""
    expr = expr.replace("$__range", f"{range_s}s")
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def prometheus_binary() -> str:
    """The prometheus binary, which `make setup` installs (Debian package `prometheus`).
    Tests never install anything: without it the test fails, naming the fix."""
    found = shutil.which("prometheus")
    if found is None:
        pytest.fail("prometheus is not installed: run `make setup` (it installs the Debian package)", pytrace=False)
    return found


class Prometheus:
    """A real Prometheus server on a free port scraping the given config (TSDB in a temp dir)."""

    def __init__(self, binary: str, config: Path, data: Path, port: int):
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def query(self, session: aiohttp.ClientSession, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        async with session.get(self.url + "/api/v1/query", params=params) as response:
            body = await response.json()
        if body.get("status") != "success":
            raise AssertionError(f"Prometheus rejected {expr!r}: {body.get('error')}")
        return body["data"]["result"]

    async def wait_ready(self, session: aiohttp.ClientSession, timeout_s: float = 30) -> None:
        async def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}")
            try:
                async with session.get(self.url + "/-/ready") as response:
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        await wait_for(ready, timeout_s, 0.2, what="prometheus ready")

    async def last_scrape(self, session: aiohttp.ClientSession, job: str) -> float:
        """When the job's target was last scraped successfully (0: not yet)."""
        # timestamp() of a plain selector is the sample's own time (of an expression: the query's)
        result = await self.query(session, f'timestamp(up{{job="{job}"}}) and up{{job="{job}"}} == 1')
        return float(result[0]["value"][1]) if result else 0.0

    def close(self) -> None:
        stop_processes([self.proc])
