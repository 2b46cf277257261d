"""What the HTTP server needs around the app: Redis connections, exposure, parser refusals, shutdown."""
