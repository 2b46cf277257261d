"""The project's own outcome set (issue 53): questions generated from templates with answers
computed by code (`generate.py`), the code that checks a model's reply (`checkers.py`), and the
run that answers them with our engine per tier level (`answering.py`, `python -m measure.outcome_set`).
The data it made and how: benchmarks/data/outcome_set/README.md."""
