"""The response cache (docs/caching.md): an answer already paid for, served again to the same
tenant for the same request, from Redis. config.py (the `cache:` section), controls.py (what a
request asks of it), key.py, identity.py (which model an answer came from), store.py (Redis),
entry.py (record and replay), service.py (plan, find, keep), hit.py, admin.py. The semantic
cache (tier zero, a similar prompt's answer): semantic.py, answer_bearing.py (the guard, with
common_words.py), prompt_text.py, semantic_index.py, similarity_bar.py."""
