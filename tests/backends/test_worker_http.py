"""The worker's OpenAI API through real HTTP: a real worker process and the real `openai` client."""
import json
import socket
import time

import pytest

from tests.support import wait_until
from tests.support.metrics import metric, scrape
from tests.support.workers import running_worker
from tests.support.kinds import starts_processes

openai = pytest.importorskip("openai", reason="the openai client is a test dependency (docs/gpu.md lists the wheels)")

MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
@starts_processes
def worker():
    with running_worker(MODEL, "--kv-cache-gb", "0.25", "--max-model-len", "2048") as running:
        yield running.base


@pytest.fixture
def client(worker):
    return openai.OpenAI(base_url=worker + "/v1", api_key="unused", max_retries=0)


def test_models_lists_the_served_model(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_chat_stream_equals_non_stream_and_reports_usage(client):
    messages = [{"role": "user", "content": "Name three colours."}]
    full = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0)
    assert full.choices[0].message.content
    assert full.usage.completion_tokens <= 24 and full.usage.prompt_tokens > 5
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == full.choices[0].finish_reason


def test_completion_stop_string_is_not_emitted(client):
    out = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=30, temperature=0, stop=[" 7"])
    assert out.choices[0].finish_reason == "stop"
    assert "7" not in out.choices[0].text and "6" in out.choices[0].text


def test_same_seed_same_sample(client):
    kwargs = dict(model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=1.0, top_p=0.95, seed=7)
    first = client.completions.create(**kwargs).choices[0].text
    assert client.completions.create(**kwargs).choices[0].text == first


@pytest.mark.parametrize("body, status, param", [
    (b"{not json", 400, None),
    (json.dumps({"model": MODEL, "messages": []}).encode(), 400, "messages"),
    (json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}).encode(), 400, "max_tokens"),
    (json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": "8"}).encode(), 400, "max_tokens"),
    (json.dumps({"model": MODEL, "messages": "hi"}).encode(), 400, "messages"),
    (json.dumps({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}).encode(), 404, "model"),
    (json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "word " * 3000}]}).encode(), 400, None),
])
def test_bad_input_gets_openai_error(worker, body, status, param):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(worker + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == status
    error = json.loads(err.value.read())["error"]
    assert error["message"] and error["type"]
    if param:
        assert error["param"] == param


def _abort_count(base: str) -> float:
    return metric(scrape(base), "tiergate_worker_requests_total", default=0.0, finish_reason="abort")


def _wait_idle(base: str, timeout: float = 30) -> None:
    def idle() -> bool:
        page = scrape(base)
        return (metric(page, "tiergate_worker_num_requests_running") == 0
                and metric(page, "tiergate_worker_kv_cache_usage_ratio") == 0)

    wait_until(idle, timeout, 0.2, what="worker back to idle (a sequence or its KV blocks leaked)")


def _send_and_drop(base: str, body: dict, read_bytes: int) -> None:
    port = int(base.rsplit(":", 1)[1])
    payload = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
        got = b""
        while len(got) < read_bytes:
            got += sock.recv(4096)
        time.sleep(0.3)


@pytest.mark.parametrize("stream", [True, False])
def test_client_disconnect_aborts_and_frees_blocks(worker, stream):
    body = {"model": MODEL, "prompt": "Count forever: 1, 2, 3,", "max_tokens": 1500, "ignore_eos": True,
            "temperature": 0, "stream": stream}
    aborts = _abort_count(worker)
    if stream:
        _send_and_drop(worker, body, read_bytes=400)  # a few SSE chunks, then hang up
    else:
        port = int(worker.rsplit(":", 1)[1])
        payload = json.dumps(body).encode()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
            wait_until(lambda: metric(scrape(worker), "tiergate_worker_num_requests_running") > 0, 30,
                       what="the request running in the worker")
    _wait_idle(worker)  # 1,500 tokens would take far longer than the wait allows
    assert _abort_count(worker) == aborts + 1


PERSON = {"type": "object", "required": ["name", "age", "home"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "home": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}


def test_a_stream_cut_by_max_tokens_is_closed_and_parses(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    for seed in range(3):
        chunks = list(client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Describe a person with a very long name."}],
            max_tokens=22, temperature=1.0, seed=seed, response_format=fmt, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        person = json.loads(text)
        assert set(person) >= {"name", "age", "home"} and "city" in person["home"]
        assert reasons in (["length"], ["stop"])


def test_max_tokens_below_the_shortest_answer_is_a_400_naming_it(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                       response_format=fmt)
    assert err.value.body["param"] == "max_tokens" and err.value.body["code"] == "max_tokens_too_small"
    assert "at least" in err.value.body["message"]


def _batch_tokens(base: str) -> float:
    return metric(scrape(base), "tiergate_worker_priority_scheduled_tokens_total", default=0.0, priority="batch")


def test_the_priority_header_reaches_the_scheduler_and_a_bad_one_is_refused(worker, client):
    before = _batch_tokens(worker)
    answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=3,
                                            extra_headers={"x-tiergate-priority": "batch"})
    assert answer.choices[0].message.content
    assert _batch_tokens(worker) > before
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=3,
                                       extra_headers={"x-tiergate-priority": "urgent"})
    assert err.value.body["param"] == "x-tiergate-priority"
