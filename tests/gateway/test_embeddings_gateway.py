"""/v1/embeddings through a live gateway (real MiniLM worker, real Redis, tenants), with the openai SDK.

The chat tier points at a dead port here: embeddings must not depend on it."""
from __future__ import annotations

import numpy as np
import openai
import pytest

from tests.gateway.dropin_stack import ADMIN_KEY, module_stack
from tests.support.metrics import metric, scrape

stack = module_stack("emb", chat=False)


def _tokens_in(stack) -> float:
    return metric(scrape(stack.url, key=ADMIN_KEY), "tiergate_tokens_total", default=0.0, tenant="beta", tier="minilm", direction="in")


def test_sdk_embeddings_default_base64_and_float(stack):
    with stack.openai() as client:
        default = client.embeddings.create(model="minilm", input=["hello there", "general kenobi"])
        floats = client.embeddings.create(model="text-embedding-3-small", input=["hello there", "general kenobi"],
                                          encoding_format="float")
    assert len(default.data) == 2 and len(default.data[0].embedding) == 384
    assert np.allclose(default.data[1].embedding, floats.data[1].embedding, atol=1e-6)
    assert default.model == "minilm" and default.usage.prompt_tokens > 0


def test_one_usage_record_per_request_and_metrics(stack):
    before_records = len(stack.usage_records())
    before_tokens = _tokens_in(stack)
    with stack.openai("beta") as client:
        raw = client.embeddings.with_raw_response.create(model="minilm", input=["one", "two", "three"])
        out = raw.parse()
    assert raw.headers["x-tiergate-tier"] == "minilm"
    records = stack.usage_records(before_records + 1)
    assert len(records) == before_records + 1
    mine = records[-1]
    assert (mine.tenant, mine.tier, mine.prompt_tokens, mine.completion_tokens) == \
        ("beta", "minilm", out.usage.prompt_tokens, 0)
    assert mine.cost_micro >= 1
    after = _tokens_in(stack)
    assert after - before_tokens == out.usage.prompt_tokens


def test_tenant_rate_limit_applies(stack):
    with stack.openai("limited") as client:
        for _ in range(2):
            client.embeddings.create(model="minilm", input="within the limit")
        with pytest.raises(openai.RateLimitError) as err:
            client.embeddings.create(model="minilm", input="over the limit")
    assert err.value.body["code"] == "rate_limit_exceeded"


def test_tenant_hard_budget_applies(stack):
    with stack.openai("frugal") as client:
        client.embeddings.create(model="minilm", input="the first request spends the whole budget")
        with pytest.raises(openai.RateLimitError) as err:
            client.embeddings.create(model="minilm", input="past the budget")
    assert err.value.body["code"] == "budget_exceeded"


def test_auth_and_routing_errors(stack):
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.embeddings.create(model="minilm", input="x")
    with stack.openai() as client:
        with pytest.raises(openai.BadRequestError) as err:
            client.embeddings.create(model="auto", input="x")
        assert err.value.body["param"] == "model"
        with pytest.raises(openai.BadRequestError) as err:
            client.embeddings.create(model="small", input="x")  # a chat tier serves no embeddings
        assert err.value.body["code"] == "wrong_endpoint" and "/v1/chat/completions" in err.value.body["message"]
        with pytest.raises(openai.BadRequestError) as err:
            client.embeddings.create(model="minilm", input="x", dimensions=64)
        assert err.value.body["param"] == "dimensions"  # the worker's verdict, passed through
