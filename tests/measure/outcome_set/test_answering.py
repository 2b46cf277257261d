"""The answering run end to end on a handful of items: a tiny randomly initialised model stands in
for each level's (our engine loads it from a folder, as it loads a prepared model), every answer
is a checked record with a logprob per generated token, a second run answers nothing again, and
`build` writes outcome lines the classifier's parser accepts."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from backends.engine.model.models import load_tokenizer, model_dir
from classifier.outcomes import read_outcome_lines
from measure.outcome_set.__main__ import main
from measure.outcome_set.answering import TOP_K, answers_path, read_answers
from measure.outcome_set.checkers import is_correct
from measure.outcome_set.generate import generate
from measure.outcome_set.levels import CHAT, FEW_SHOT, LEVELS

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
LIMIT = 6


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A one-layer Llama with SmolLM2's tokenizer (so the chat template and decoding are real)."""
    folder = tmp_path_factory.mktemp("tiny-chat-model")
    for name in TOKENIZER_FILES:
        shutil.copy(model_dir("smollm2-135m") / name, folder / name)
    tokenizer = load_tokenizer(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None, pad_token_id=None)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def _run(command: str, answers, tiny_folder, out=None) -> int:
    argv = [command, "--levels", "1", "4", "--limit", str(LIMIT), "--answers", str(answers),
            "--model", f"1={tiny_folder}", "--model", f"4={tiny_folder}"]
    return main(argv + (["--out", str(out)] if out else []))


def test_answers_are_checked_records_and_build_writes_outcome_lines(tiny_folder, tmp_path, capsys):
    assert _run("answer", tmp_path, tiny_folder) == 0
    items = {item["id"]: item for item in generate()}
    assert {LEVELS[1].prompt, LEVELS[4].prompt} == {CHAT, FEW_SHOT}  # both prompt styles run
    for level in (1, 4):
        rows = read_answers(answers_path(tmp_path, level))
        assert len(rows) == LIMIT
        for row in rows.values():
            assert row["level"] == level and row["model"] == str(tiny_folder)
            assert row["correct"] == is_correct(items[row["id"]], row["text"])
            assert 1 <= row["tokens"] <= items[row["id"]]["max_tokens"]
            assert len(row["logprobs"]) == len(row["top_logprobs"]) == row["tokens"]
            for chosen, top in zip(row["logprobs"], row["top_logprobs"]):
                assert len(top) == TOP_K and top == sorted(top, reverse=True) and chosen <= top[0] <= 0
        if LEVELS[level].prompt == FEW_SHOT:  # a few-shot answer is one line
            assert all("\n" not in row["text"] for row in rows.values())

    before = answers_path(tmp_path, 1).read_text()
    assert _run("answer", tmp_path, tiny_folder) == 0
    assert answers_path(tmp_path, 1).read_text() == before  # resumed: nothing answered twice

    out = tmp_path / "outcomes.jsonl"
    capsys.readouterr()
    assert _run("build", tmp_path, tiny_folder, out) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    requests, outcomes = read_outcome_lines(out)
    assert len(requests) == LIMIT == summary["items"]
    assert all(set(levels) == {1, 4} for levels in outcomes)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    right = sum(line["outcomes"]["4"] for line in lines) / LIMIT
    assert summary["accuracy"]["4"] == round(right, 4)
    assert all(line["answers"].keys() == line["logprobs"].keys() == {"1", "4"} for line in lines)
    assert all(line["top_logprobs"].keys() == {"1"} for line in lines)  # below the top level only


def test_a_cut_last_line_is_ignored_and_answered_again(tmp_path):
    path = answers_path(tmp_path, 2)
    path.write_text(json.dumps({"id": "a-0001", "text": "1"}) + "\n" + '{"id": "a-0002", "te')
    assert list(read_answers(path)) == ["a-0001"]
