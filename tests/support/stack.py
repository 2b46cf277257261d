"""The one builder of live stacks for tests: real inference workers, fake upstream processes and
gateway processes, each on a free loopback port and logging to a file in the test's folder (shown
when a start fails), with one key prefix of its own on the shared Redis. `close()` stops them all
and drops the prefix; a failed start closes what it had started. Workers started by someone else
(the session's `shared_worker`) are only URLs in a gateway's config: never stopped here."""
from __future__ import annotations

import http.client
import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from launcher import commands
from launcher.group import ProcessGroup
from launcher.workers import worker_command
from tests.support import SHARED_REDIS, delete_prefix, free_port


@dataclass
class Response:
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


def label(url: str) -> str:
    """How the gateway names a worker (x-tiergate-backend, trace attributes): host:port."""
    return url.removeprefix("http://")


class Stack:
    def __init__(self, tmp: Path, name: str = "stack"):
        self.tmp = Path(tmp)
        self.group = ProcessGroup(self.tmp)
        self.prefix = f"tg{name}:{uuid.uuid4().hex[:10]}:"
        self.workers: list[subprocess.Popen] = []  # started here, in order (a chaos test kills one)
        self.worker_urls: list[str] = []  # behind the gateways: those started here, after any given to it
        self.gateways: list[subprocess.Popen] = []
        self.urls: list[str] = []  # the gateways'
        self.configs: list[Path] = []  # their config files (a test may rewrite one: hot reload)

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def _started(self, start):
        try:
            return start()
        except BaseException:
            self.close()
            raise

    def start_workers(self, model: str, count: int = 1, *flags: str) -> list[str]:
        """`count` workers serving `model` with these flags, loading side by side; their URLs."""
        def start() -> list[str]:
            ports = [free_port() for _ in range(count)]
            procs = [self.group.spawn(f"worker-{port}", worker_command(model, port, *flags)) for port in ports]
            self.workers += procs
            urls = [f"http://127.0.0.1:{port}" for port in ports]
            for url, proc in zip(urls, procs):
                self.group.wait_healthy(url, proc)
            self.worker_urls += urls
            return urls
        return self._started(start)

    def start_upstreams(self, count: int = 1, *flags: str) -> list[str]:
        """`count` fake OpenAI upstream processes (launcher.fake_upstream, with these flags); their URLs."""
        def start() -> list[str]:
            ports = [free_port() for _ in range(count)]
            for port in ports:
                self.group.spawn(f"upstream-{port}", commands.fake_upstream(port, *flags))
            for port in ports:
                self.group.wait_port(port, 30)
            return [f"http://127.0.0.1:{port}" for port in ports]
        return self._started(start)

    def start_gateways(self, doc: dict, count: int = 1, supervised: bool = False) -> list[str]:
        """`count` gateway processes on one config: `doc`, on this stack's Redis prefix unless its own
        redis section says otherwise. `supervised`: `python -m gateway` (one serving process under
        the supervisor, metrics aggregated), else `python -m gateway.process`. Their URLs."""
        def start() -> list[str]:
            config = self.tmp / f"tiergate-{len(self.configs)}.yaml"
            self.configs.append(config)
            config.write_text(yaml.safe_dump(
                {**doc, "redis": {"url": SHARED_REDIS, "key_prefix": self.prefix, **doc.get("redis", {})}}))
            started = []
            for _ in range(count):
                port = free_port()
                command = commands.gateway_processes(config, port, workers=1) if supervised \
                    else commands.gateway_serve(config, port)
                proc = self.group.spawn(f"gateway{len(self.gateways)}", command)
                self.gateways.append(proc)
                started.append((f"http://127.0.0.1:{port}", proc))
            for url, proc in started:
                self.group.wait_healthy(url, proc, 60)
            self.urls += [url for url, _ in started]
            return [url for url, _ in started]
        return self._started(start)

    def gateway_log(self, index: int = 0) -> str:
        """Everything gateway `index` has printed so far."""
        return self.group.log_text(f"gateway{index}")

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 15.0, url: str | None = None) -> Response:
        """One request with http.client (any bytes and headers on the wire) to the first gateway or `url`."""
        host, port = label(url or self.url).rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            answer = conn.getresponse()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
        finally:
            conn.close()

    def close(self) -> None:
        self.group.stop()
        delete_prefix(self.prefix)
