"""OpenAPI descriptions of the drop-in endpoints (/v1/embeddings, ...), merged into openapi.SPEC."""
from __future__ import annotations


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


_TOKENS = {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}

SCHEMAS = {
    "EmbeddingsRequest": {"type": "object", "required": ["model", "input"], "additionalProperties": False,
                          "properties": {
        "model": {"type": "string", "minLength": 1,
                  "description": "an embeddings tier, its model or an alias (`auto` is refused)"},
        "input": {"oneOf": [{"type": "string", "minLength": 1},
                            {"type": "array", "minItems": 1, "maxItems": 2048, "items": {"type": "string", "minLength": 1}},
                            _TOKENS, {"type": "array", "minItems": 1, "maxItems": 2048, "items": _TOKENS}]},
        "encoding_format": {"enum": ["float", "base64"]},
        "dimensions": {"type": "integer", "minimum": 1, "description": "only sizes the model supports"},
        "user": {"type": "string"}}},
    "Embeddings": {"type": "object", "required": ["object", "data", "model", "usage"], "properties": {
        "object": {"const": "list"}, "model": {"type": "string"},
        "data": {"type": "array", "items": {"type": "object", "properties": {
            "object": {"const": "embedding"}, "index": {"type": "integer"},
            "embedding": {"oneOf": [{"type": "array", "items": {"type": "number"}},
                                    {"type": "string", "description": "base64 of little-endian float32"}]}}}},
        "usage": {"type": "object", "properties": {"prompt_tokens": {"type": "integer"},
                                                   "total_tokens": {"type": "integer"}}}}},
}


SCHEMAS.update({
    "ResponsesRequest": {"type": "object", "required": ["model", "input"], "description":
                         "OpenAI Responses API: input (string or message / function_call / function_call_output "
                         "items), instructions, function tools, tool_choice, text.format, max_output_tokens, "
                         "temperature, top_p, stream, store, previous_response_id (same tenant only)"},
    "Response": {"type": "object", "required": ["id", "object", "status", "output"], "properties": {
        "id": {"type": "string"}, "object": {"const": "response"}, "status": {"type": "string"},
        "output": {"type": "array", "items": {"type": "object"}}, "usage": {"type": ["object", "null"]}}},
    "MessagesRequest": {"type": "object", "required": ["model", "messages", "max_tokens"], "description":
                        "Anthropic Messages API: system, messages (text, tool_use, tool_result blocks), tools, "
                        "tool_choice, max_tokens, stop_sequences, temperature, top_p, top_k, stream. "
                        "Authenticate with x-api-key or a bearer token."},
    "Message": {"type": "object", "required": ["id", "type", "role", "content"], "properties": {
        "id": {"type": "string"}, "type": {"const": "message"}, "role": {"const": "assistant"},
        "content": {"type": "array", "items": {"type": "object"}}, "stop_reason": {"type": ["string", "null"]},
        "usage": {"type": "object"}}},
    "AnthropicError": {"type": "object", "required": ["type", "error"], "properties": {
        "type": {"const": "error"}, "error": {"type": "object", "required": ["type", "message"], "properties": {
            "type": {"type": "string"}, "message": {"type": "string"}}}}},
})
_EVENTS = {"text/event-stream": {"schema": {"type": "string", "description": "Named SSE events (`event:` + `data:`)"}}}


def _translated(summary: str, request: str, response: str, errors: dict, json_body) -> dict:
    ok = json_body(_ref(response), "The answer (or named SSE events when `stream` is true)")
    ok["content"].update(_EVENTS)
    return {"post": {"summary": summary, "requestBody": {"required": True, "content": {
        "application/json": {"schema": _ref(request)}}}, "responses": {"200": ok, **errors}}}


def paths(errors: dict, json_body) -> dict:
    anthropic_errors = {code: json_body(_ref("AnthropicError"), e["description"]) for code, e in errors.items()}
    return {
        "/v1/responses": _translated("OpenAI Responses API on the chat routing", "ResponsesRequest", "Response",
                                     errors, json_body),
        "/v1/messages": _translated("Anthropic Messages API on the chat routing", "MessagesRequest", "Message",
                                    anthropic_errors, json_body),
        "/v1/embeddings": {"post": {"summary": "Embeddings (tier chosen by model name)",
                                    "requestBody": {"required": True, "content": {"application/json": {
                                        "schema": _ref("EmbeddingsRequest")}}},
                                    "responses": {"200": json_body(_ref("Embeddings"), "The vectors"), **errors}}},
    }
