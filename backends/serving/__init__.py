"""The worker's OpenAI surface, piece by piece: prompts, sampling settings, tool calls, response bodies."""
