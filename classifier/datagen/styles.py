"""Ways of wrapping one task into a request: system prompts, earlier turns, lead-ins,
suffixes, and the one modifier that changes the label (stacked hard constraints, RUBRIC.md)."""
from __future__ import annotations

import random

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a concise assistant. Answer briefly unless asked otherwise.",
    "You are an expert tutor who explains things step by step.",
    "You are a customer support agent for an online shop. Be polite and accurate.",
    "You are a senior software engineer reviewing code for a colleague.",
    "You are a careful research assistant. Cite assumptions explicitly.",
    "Always answer in Markdown. Use headings where useful.",
    "You work for a law firm's knowledge team; never give definitive legal advice.",
    "You are a friendly chatbot for a cooking website.",
    "You are a data analyst. Prefer tables for numeric answers.",
    "Respond as a patient teacher for secondary school students.",
    "You are an assistant embedded in a spreadsheet product. Keep answers practical.",
]

EARLIER_TURNS = [
    [("user", "Hi, can you help me with something?"), ("assistant", "Of course! What do you need?")],
    [("user", "I'm working on a project this week."), ("assistant", "Sounds good. How can I help with it?")],
    [("user", "What's a good name for a cat?"), ("assistant", "How about Miso, Pepper or Juniper?"),
     ("user", "Ha, nice. Different question now."), ("assistant", "Sure, go ahead.")],
    [("user", "Thanks for the earlier answer."), ("assistant", "You're welcome! Anything else?")],
    [("user", "Can you keep answers short?"), ("assistant", "Sure, I'll keep them brief.")],
    [("user", "I have a few questions for my team meeting."), ("assistant", "Happy to help. What's first?"),
     ("user", "First one was answered already, second one below."), ("assistant", "Okay, send it over.")],
    [("user", "Earlier you explained recursion to me."),
     ("assistant", "Yes, a function that calls itself on a smaller input until it reaches a base case.")],
]

LEAD_INS = ["", "", "", "Hey! ", "Quick one: ", "Hi there, ", "Question for you. ", "Urgent: ",
            "I was wondering about this. ", "Please help. "]
SUFFIXES = ["", "", "", " Thanks!", " Please be concise.", " Use markdown.", " Thank you in advance.",
            " No need to be too formal.", " Answer in {language}."]

HARD_CONSTRAINTS = [
    "The answer must be under {words} words.",
    "Use exactly {n} sections with headings.",
    "Do not use any bullet points.",
    "Include a table comparing at least three options.",
    "Cite a source or assumption for every number.",
    "Write for {audience} but keep every technical term accurate.",
    "End with a numbered list of risks and a mitigation for each.",
    "Every paragraph must start with a verb.",
    "Give the final answer as valid JSON with keys summary, steps, caveats.",
    "Avoid the words 'simple', 'easy' and 'just'.",
    "Provide two alternative versions and explain the difference.",
]


def stacked_constraints(rng: random.Random) -> str:
    """Four to six independent hard constraints (the label modifier in RUBRIC.md)."""
    picked = rng.sample(HARD_CONSTRAINTS, k=rng.randint(4, 6))
    return "\n\nRequirements:\n" + "\n".join(f"- {c}" for c in picked)


def wrap(rng: random.Random, task: str, fill) -> tuple[dict, str]:
    """Turn a task text into a request body (`messages` or `prompt`) and name its style."""
    lead, suffix = rng.choice(LEAD_INS), fill(rng.choice(SUFFIXES))
    if rng.random() < 0.1:
        task = task.lower()
    text = (lead + (task[0].lower() + task[1:] if lead and lead[-2] == "," else task) + suffix).strip()
    roll = rng.random()
    if roll < 0.2:
        return {"prompt": text}, "completion"
    messages = []
    style = "chat"
    if rng.random() < 0.35:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
        style = "chat+system"
    if rng.random() < 0.25:
        messages += [{"role": r, "content": c} for r, c in rng.choice(EARLIER_TURNS)]
        style += "+multiturn"
    messages.append({"role": "user", "content": text})
    return {"messages": messages}, style
