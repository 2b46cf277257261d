"""Slot values shared by every domain, plus generated documents and code of varying length.

A slot `{name}` in a template takes a value from the domain's own slots first, then from
here. Numbers are drawn fresh per prompt so that no two rows repeat the same figures.
"""
from __future__ import annotations

import random

GLOBAL_SLOTS: dict[str, list[str]] = {
    "name": ["Priya", "Tomas", "Aiko", "Daniel", "Fatima", "Lukas", "Mei", "Oluwaseun", "Sofia",
             "Rahul", "Elena", "Marcus", "Ingrid", "Kwame", "Chloe", "Diego"],
    "city": ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Lima", "Hanoi", "Adelaide",
             "Bergen", "Porto Alegre", "Marrakesh", "Tallinn", "Cebu", "Denver"],
    "country": ["Portugal", "Kenya", "Japan", "Canada", "Poland", "Peru", "Vietnam", "Australia",
                "Norway", "Brazil", "Morocco", "Estonia", "Chile", "Ghana", "Iceland"],
    "language": ["Spanish", "French", "German", "Japanese", "Portuguese", "Italian", "Korean",
                 "Dutch", "Swahili", "Polish", "Turkish", "Hindi"],
    "prog_lang": ["Python", "JavaScript", "TypeScript", "Go", "Rust", "Java", "C#", "Kotlin"],
    "company": ["a small bakery", "a regional bank", "a SaaS startup", "a hospital network",
                "a logistics firm", "an online bookshop", "a university lab", "a game studio"],
    "audience": ["a ten-year-old", "a new employee", "a senior engineer", "my grandmother",
                 "a first-year student", "a busy executive", "a non-technical client"],
    "tone": ["friendly", "formal", "playful", "concise", "apologetic", "enthusiastic"],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
}

_DOC_SUBJECTS = ["the support team", "the new onboarding flow", "our warehouse in the north",
                 "the pilot programme", "the mobile app", "the quarterly survey",
                 "the billing system", "the volunteer group", "the research unit", "the city council"]
_DOC_VERBS = ["reported", "noted", "found", "confirmed", "estimated", "argued", "observed"]
_DOC_CLAIMS = ["response times improved by {p} percent", "costs rose by {p} percent",
               "customer complaints fell to {n} per week", "{n} staff members joined the effort",
               "the backlog shrank by {p} percent", "the budget overran by {n} thousand dollars",
               "satisfaction scores reached {p} out of 100", "{n} incidents were closed early",
               "delivery delays doubled during the holidays", "training hours dropped to {n}"]
_DOC_LINKS = ["Meanwhile,", "However,", "In addition,", "As a result,", "Separately,",
              "By contrast,", "Later that month,", "According to the minutes,"]


def document(rng: random.Random, sentences: int) -> str:
    """A plausible business-report style text of the given number of sentences."""
    out = []
    for i in range(sentences):
        claim = rng.choice(_DOC_CLAIMS).format(p=rng.randint(3, 60), n=rng.randint(2, 90))
        lead = rng.choice(_DOC_LINKS) + " " if i and rng.random() < 0.4 else ""
        subj = rng.choice(_DOC_SUBJECTS)
        out.append(f"{lead}{subj[0].upper() if not lead else subj[0]}{subj[1:]} "
                   f"{rng.choice(_DOC_VERBS)} that {claim}.")
        if rng.random() < 0.15:
            out.append("\n\n")
    return " ".join(out).replace(" \n\n ", "\n\n")


_CODE_SNIPPETS = [
    "def total(items):\n    s = 0\n    for i in range(len(items)):\n        s += items[i]['price'] * items[i]['qty']\n    return s",
    "function debounce(fn, ms) {\n  let t;\n  return (...args) => {\n    clearTimeout(t);\n    t = setTimeout(() => fn(...args), ms);\n  };\n}",
    "SELECT c.name, COUNT(o.id)\nFROM customers c LEFT JOIN orders o ON o.customer_id = c.id\nWHERE o.created_at > '2024-01-01'\nGROUP BY c.name;",
    "class Cache:\n    def __init__(self):\n        self.data = {}\n    def get(self, k):\n        return self.data[k]\n    def put(self, k, v):\n        self.data[k] = v",
    "func sum(xs []int) int {\n\tt := 0\n\tfor _, x := range xs {\n\t\tt += x\n\t}\n\treturn t\n}",
    "for i in range(10):\n    if i % 2 == 0:\n        print(i)\n    else:\n        continue",
    "fn parse(s: &str) -> Option<u32> {\n    s.trim().parse().ok()\n}",
    "const users = await fetch('/api/users').then(r => r.json());\nusers.forEach(u => console.log(u.name));",
    "public int fib(int n) {\n    if (n < 2) return n;\n    return fib(n - 1) + fib(n - 2);\n}",
    "import threading\ncounter = 0\ndef work():\n    global counter\n    for _ in range(100000):\n        counter += 1\nthreads = [threading.Thread(target=work) for _ in range(4)]",
]


def code_snippet(rng: random.Random, long: bool = False) -> str:
    if not long:
        return rng.choice(_CODE_SNIPPETS)
    return "\n\n".join(rng.sample(_CODE_SNIPPETS, k=rng.randint(3, 6)))


def numbers(rng: random.Random) -> dict[str, str]:
    """Fresh numeric slot values for one prompt."""
    return {
        "n": str(rng.randint(2, 9)), "m": str(rng.randint(10, 99)),
        "num": str(rng.randint(100, 999)), "big": str(rng.randint(1000, 99999)),
        "pct": str(rng.randint(5, 45)), "year": str(rng.randint(1850, 2023)),
        "words": str(rng.choice([50, 100, 150, 200, 300, 500, 800, 1200, 2000])),
        "price": f"{rng.randint(2, 400)}.{rng.randint(0, 99):02d}",
    }
