"""The policy seam over HTTP: the gateway calls authenticate/decide/admit/settle at the agreed
points (tests/gateway/recording_policy.py is the policy). What admission reserves against what the
worker is asked for is checked in process: test_handlers.py."""
from __future__ import annotations

import openai
import pytest

from tests.gateway.gw_helpers import base_config, tier
from tests.gateway.recording_policy import RecordingPolicy
from tests.support import wait_for


@pytest.fixture
async def setup(fakes, gateway, redis_prefix):
    (bad, bad_url), (good, good_url) = await fakes(2, chunks=6)
    bad.fail_status = 500
    policy = RecordingPolicy(max_requests=4)
    gw = await gateway(base_config([tier("small", 1, [bad_url, good_url])], redis_prefix),
                       policy_factory=lambda config, redis: policy)
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="key-a", max_retries=0)
    yield gw, client, policy, bad, good
    await client.close()


async def test_auth_cap_priority_and_one_settle_per_request_despite_retries(setup):
    gw, client, policy, bad, good = setup
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="wrong", max_retries=0) as intruder:
        with pytest.raises(openai.AuthenticationError):
            await intruder.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    for _ in range(2):
        raw = await client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": "hi"}], max_tokens=50)
        answer = raw.parse()
        assert answer.usage.completion_tokens == 2  # capped by the policy
    assert good.seen[-1]["body"]["max_tokens"] == 2 and good.seen[-1]["headers"]["x-tiergate-priority"] == "batch"
    assert len(bad.seen) >= 1  # a retry happened...
    await wait_for(lambda: len(policy.settled) >= 2, timeout_s=5)  # settles are written after the answer
    ids = [s[0] for s in policy.settled]
    assert len(ids) == 2 and len(set(ids)) == 2  # ...but each request settled exactly once
    assert all(s[1] == "small" and s[3] == 2 and s[2] > 0 for s in policy.settled)


async def test_cut_stream_settles_tokens_streamed_so_far(setup):
    gw, client, policy, bad, good = setup
    bad.fail_status = None
    bad.cut_after = good.cut_after = 1
    stream = await client.chat.completions.create(
        model="small", messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=5)
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass
    await wait_for(lambda: policy.settled, timeout_s=5)
    assert len(policy.settled) == 1 and policy.settled[0][3] == 1


async def test_admission_refusal_is_429_with_retry_after_and_no_settle(setup, http):
    gw, client, policy, bad, good = setup
    policy.admitted = policy.max_requests
    async with http.post(gw.url + "/v1/chat/completions", headers={"Authorization": "Bearer key-a"},
                         json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]}) as response:
        assert response.status == 429 and response.headers["Retry-After"] == "7"
        assert response.headers["x-tiergate-tier"] == "small"  # the refusal says where it was routed
        assert (await response.json())["error"]["code"] == "rate_limit_exceeded"
    assert policy.settled == [] and good.served == 0
    async with http.post(gw.url + "/v1/route", headers={"Authorization": "Bearer key-a"},
                         json={"model": "auto", "prompt": "hi"}) as response:
        decision = await response.json()
    assert decision["steps"][-1] == {"step": "limits", "max_tokens_cap": 2, "priority": "batch"}
    assert decision["tenant"] == "team-a" and decision["routed_by"] == "classifier"
    assert decision["priority"] == "batch"
