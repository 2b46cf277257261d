"""Prompt token ids for one item: the chat template for an instruct model, worked examples for a base
model. The examples are written here and differ in topic from every generated family."""
from __future__ import annotations

from .levels import CHAT, FEW_SHOT

EXAMPLES = (
    ("How many wheels does a bicycle have? Answer with a number.", "2"),
    ("What colour is fresh grass? Answer with one word.", "green"),
    ("Write the word 'note' backwards. Answer with the reversed word only.", "eton"),
    ("Is a whale a fish? Answer yes or no.", "no"),
)
FEW_SHOT_HEAD = "Answer each question with the answer alone, on one line.\n\n" + "".join(
    f"Question: {q}\nAnswer: {a}\n\n" for q, a in EXAMPLES)


def few_shot_text(item: dict) -> str:
    return f"{FEW_SHOT_HEAD}Question: {item['messages'][-1]['content']}\nAnswer:"


def prompt_ids(tokenizer, style: str, item: dict) -> list[int]:
    if style == CHAT:
        return list(tokenizer.apply_chat_template(item["messages"], add_generation_prompt=True, tokenize=True,
                                                  return_dict=False))
    if style == FEW_SHOT:
        return tokenizer.encode(few_shot_text(item))
    raise ValueError(f"unknown prompt style {style!r}")
