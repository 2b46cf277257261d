"""/v1/models says which endpoints serve each name, and a name sent to the wrong endpoint gets a
400 that names the right one (not a 404 for a model /v1/models just listed)."""
from __future__ import annotations

import openai
import pytest

from tests.gateway.gw_helpers import base_config, tier
from tests.support.scripted_transport import ScriptedTransport, worker

CHAT = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"]


@pytest.fixture
async def gw(gateway, redis_prefix):
    url = "http://worker.test"  # played by the scripted transport: no socket on the worker's side
    doc = base_config([tier("small", 1, [url], model="chatty")], redis_prefix,
                      embeddings=[tier("vectors", 1, [url], model="mini-vec")],
                      aliases={"fast": "small", "text-embedding-3-small": "vectors"})
    return await gateway(doc, transport=ScriptedTransport(worker))


async def test_every_listed_name_says_its_endpoints(gw):
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x") as client:
        listed = {m.id: m.model_extra["tiergate"]["endpoints"] async for m in client.models.list()}
    assert listed == {"auto": CHAT, "small": CHAT, "chatty": CHAT, "fast": CHAT, "vectors": ["/v1/embeddings"],
                      "mini-vec": ["/v1/embeddings"], "text-embedding-3-small": ["/v1/embeddings"]}


@pytest.mark.parametrize("name", ["vectors", "mini-vec", "text-embedding-3-small"])
async def test_chat_to_an_embeddings_model_names_the_embeddings_endpoint(gw, name):
    async with openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as err:
            await client.chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}])
        assert err.value.body["code"] == "wrong_endpoint" and "/v1/embeddings" in err.value.body["message"]
        with pytest.raises(openai.BadRequestError) as err:
            await client.embeddings.create(model="chatty", input="hi")
        assert err.value.body["code"] == "wrong_endpoint" and "/v1/chat/completions" in err.value.body["message"]
        assert len((await client.embeddings.create(model=name, input="hi")).data) == 1
