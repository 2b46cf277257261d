"""conclude(): what follows an answer, through `serve` in process (real policy and ledger in
Redis, a scripted transport): the upstream connection given back or closed, the usage log's
record of what was served, and a replaced answer billed under an id of its own."""
from __future__ import annotations

import asyncio
import glob
import json

import pytest

from gateway.api.handlers import serve
from policies.keys import hash_key
from policies.usage_log import read_records
from tests.gateway.gw_helpers import base_config, tier
from tests.support import wait_for
from tests.support.in_process import chat_call, services_for
from tests.support.scripted_transport import Reply, ScriptedTransport, chat_answer

KEY = "sk-conclude-key"
SMALL, LARGE = "http://small.test", "http://large.test"
FORMAT = {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object", "required": ["name"]}}}


@pytest.fixture
def build(redis_prefix, tmp_path):
    def make(script):
        tiers = [{**tier(name, level, [url]), "capabilities": {"structured_outputs": True}}
                 for level, (name, url) in enumerate((("small", SMALL), ("large", LARGE)), start=1)]
        doc = base_config(tiers, redis_prefix, tenants={"acme": {"keys": [{"id": "k", "sha256": hash_key(KEY)}]}},
                          policy={"usage_log": {"dir": str(tmp_path / "usage"), "fsync": "always"}})
        transport = ScriptedTransport(script)
        return services_for(doc, transport), transport
    return make, lambda: read_records(sorted(glob.glob(str(tmp_path / "usage" / "*"))))


async def test_a_served_answer_is_booked_once_and_its_connection_goes_back(build):
    make, records = build
    services, transport = make(lambda sent: Reply(body=chat_answer("hi", 11, 4)))
    call = chat_call(services, KEY, model="small")
    answer = await serve(services, call)
    assert answer.status == 200 and answer.headers["x-tiergate-tier"] == "small"
    [record] = await wait_for(records, timeout_s=5, what="the usage record")
    assert (record.request_id, record.tenant, record.tier) == (call.ctx.request_id, "acme", "small")
    assert (record.prompt_tokens, record.completion_tokens, record.usage_source) == (11, 4, "worker")
    [response] = transport.responses
    assert response.released and not response.closed


async def test_an_answer_replaced_on_shape_is_billed_too_under_its_own_id(build):
    make, records = build

    def script(sent):
        small = sent.url.startswith(SMALL)
        return Reply(body=chat_answer("no" if small else json.dumps({"name": "Ada"}), 5, 2 if small else 3))

    services, _ = make(script)
    call = chat_call(services, KEY, model="small", response_format=FORMAT)
    answer = await serve(services, call)
    assert answer.headers["x-tiergate-tier"] == "large"
    booked = await wait_for(lambda: len(r := records()) == 2 and r, timeout_s=5, what="both records")
    by_id = {r.request_id: (r.tier, r.completion_tokens) for r in booked}
    assert by_id == {call.ctx.request_id: ("small", 2), f"{call.ctx.request_id}.2": ("large", 3)}


async def test_a_client_gone_mid_answer_is_still_booked_and_its_upstream_closed(build):
    make, records = build
    generating = asyncio.Event()
    counted = {"finished": True, "usage": {"prompt_tokens": 6, "completion_tokens": 8}}
    services, transport = make(lambda sent: Reply(body=counted) if "/abort" in sent.url
                               else Reply(body=chat_answer(), hold=generating))
    call = chat_call(services, KEY, model="small")
    task = asyncio.create_task(serve(services, call))
    await wait_for(lambda: transport.sent, timeout_s=5, what="the request sent to the worker")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [record] = await wait_for(records, timeout_s=5, what="the usage record")
    assert (record.request_id, record.completion_tokens, record.usage_source) == (call.ctx.request_id, 8, "worker")
