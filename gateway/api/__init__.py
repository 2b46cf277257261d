"""The OpenAI API surface: chat, completions, embeddings, models, usage, /v1/route and the served spec."""
