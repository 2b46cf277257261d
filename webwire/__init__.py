"""The aiohttp binding of wire/: OpenAI error responses, the error middleware and JSON body
reading. Both HTTP servers (gateway and backends) use aiohttp, so the binding is written once
here, outside wire/, which stays free of any web framework; it imports wire only."""
