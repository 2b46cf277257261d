"""Translations for clients of other APIs: /v1/responses (with stored responses) and /v1/messages."""
