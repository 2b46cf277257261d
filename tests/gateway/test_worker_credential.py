"""Workers answer only their gateway: every route but /health wants the internal key (401 with an
OpenAI error body otherwise), the gateway sends it on every call it makes (generations, and the
abort call that settles a cut stream), and a worker on a reachable address without a key refuses
to start. A real worker process with a key, an in-process gateway with tenants, the shared Redis."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import uuid

import pytest

from launcher.processes import free_port
from launcher.workers import worker_command
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from tests.support.workers import running_worker
from webwire.internal_key import WORKER_KEY_ENV

pytestmark = pytest.mark.live
MODEL = "smollm2-135m"
TENANT_KEY = "sk-credential-tenant"
WORKER_KEY = "internal-" + uuid.uuid4().hex
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
# every route of backends/openai_server.py but /health
GUARDED = [("POST", "/v1/chat/completions", CHAT), ("POST", "/v1/completions", {"model": MODEL, "prompt": "hi"}),
           ("GET", "/v1/models", None), ("GET", "/metrics", None),
           ("POST", "/v1/internal/requests/req-someone-elses/abort?wait_s=0", None)]


@pytest.fixture(scope="module")
def keyed_worker():
    with running_worker(MODEL, "--kv-cache-gb", "0.25", "--max-model-len", "2048", key=WORKER_KEY) as worker:
        yield worker.base


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": WORKER_KEY},
                                     {"Authorization": f"Bearer {WORKER_KEY}x"}])
async def test_every_route_but_health_refuses_a_caller_without_the_key(keyed_worker, http, headers):
    for method, path, body in GUARDED:
        async with http.request(method, keyed_worker + path, json=body, headers=headers) as answer:
            assert answer.status == 401, (method, path)
            error = (await answer.json())["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["code"] == "invalid_api_key"
    async with http.get(keyed_worker + "/health") as answer:
        assert answer.status == 200  # probes carry no credential


async def test_with_the_key_every_route_answers(keyed_worker, http):
    auth = {"Authorization": f"Bearer {WORKER_KEY}"}
    statuses = {}
    for method, path, body in GUARDED:
        async with http.request(method, keyed_worker + path, json=body, headers=auth) as answer:
            statuses[path] = answer.status
    assert statuses.pop("/v1/internal/requests/req-someone-elses/abort?wait_s=0") == 404  # past the key: no such id
    assert set(statuses.values()) == {200}


async def test_the_gateway_sends_the_key_on_generations_and_the_abort_call(keyed_worker, gateway, redis_prefix,
                                                                          tmp_path, monkeypatch, http):
    monkeypatch.setenv("TEST_INTERNAL_WORKER_KEY", WORKER_KEY)
    small = {**tier("small", 1, [keyed_worker], model=MODEL), "api_key_env": "TEST_INTERNAL_WORKER_KEY"}
    doc = base_config([small], redis_prefix, tenants={"acme": {"keys": [{"id": "k", "sha256": hash_key(TENANT_KEY)}]}},
                      policy={"usage_log": {"dir": str(tmp_path / "usage"), "fsync": "always"}},
                      timeouts={"connect_s": 1.0, "read_s": 60.0})
    gw = await gateway(doc)
    auth = {"Authorization": f"Bearer {TENANT_KEY}"}
    async with http.post(gw.url + "/v1/chat/completions", json={**CHAT, "model": "small"}, headers=auth) as answer:
        assert answer.status == 200, await answer.text()
    body = {"model": "small", "messages": [{"role": "user", "content": "Count from 1 to 500."}],
            "max_tokens": 300, "temperature": 0, "stream": True}
    received = 0
    async with http.post(gw.url + "/v1/chat/completions", json=body, headers=auth) as answer:
        async for line in answer.content:
            if line.startswith(b"data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                received += 1
                if received == 3:
                    break
        answer.close()  # the client leaves mid-stream: the gateway asks the worker what it generated

    def records():
        return read_records(sorted(glob.glob(str(tmp_path / "usage" / "*"))))

    whole, cut = await wait_for(lambda: found if len(found := records()) == 2 else None, timeout_s=30,
                                what="both usage records")
    assert whole.usage_source == "worker"
    assert cut.usage_source == "worker" and cut.completion_tokens >= received  # the abort call got through


def test_a_worker_on_a_reachable_address_without_a_key_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != WORKER_KEY_ENV}
    command = worker_command(MODEL, free_port()) + ["--host", "0.0.0.0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and f"without {WORKER_KEY_ENV}" in done.stderr
