"""The request path every surface shares: parse, classify, route, admit, relay, conclude."""
