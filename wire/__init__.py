"""The OpenAI wire format shared by the gateway and the workers: request validation,
OpenAI error bodies and SSE framing. Imports nothing from either side."""
