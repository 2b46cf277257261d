"""--override-generation-config: sampling defaults over the model's generation config, checked
key by key at start, shown in the worker's card and used by requests that leave them unset."""
from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from backends.engine.config import EngineConfig
from backends.serving.generation_defaults import parse_overrides
from backends.worker import build_app, build_parser


@pytest.mark.parametrize("text, named", [('{"temp": 1}', "'temp' cannot be overridden"),
                                         ('{"top_k": 1.5}', "'top_k' must be an integer"),
                                         ('{"temperature": 3}', "'temperature' must be a number from 0 to 2"),
                                         ('[1]', "not a JSON object")])
def test_a_bad_override_is_refused_at_start_naming_its_key(text, named, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--model", "m", "--override-generation-config", text])
    assert named in capsys.readouterr().err


async def test_overrides_win_over_the_model_and_lose_to_the_request():
    overrides = parse_overrides('{"temperature": 0.0, "max_tokens": 6}')
    app, _ = build_app(EngineConfig(model="smollm2-135m"), generation_overrides=overrides)
    async with TestClient(TestServer(app)) as client:
        card = (await (await client.get("/v1/models")).json())["data"][0]
        assert card["generation_defaults"]["temperature"] == 0.0 and card["generation_defaults"]["max_tokens"] == 6
        ask = {"model": "smollm2-135m", "messages": [{"role": "user", "content": "Tell me about the sea."}]}
        first, again = [await (await client.post("/v1/chat/completions", json={**ask, "seed": s})).json()
                        for s in (1, 2)]
        assert first["choices"][0]["message"]["content"] == again["choices"][0]["message"]["content"]  # greedy
        assert first["usage"]["completion_tokens"] == 6
        longer = await (await client.post("/v1/chat/completions", json={**ask, "max_tokens": 9})).json()
        assert longer["usage"]["completion_tokens"] == 9
