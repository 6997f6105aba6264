"""Gateway: the HTTP API (scans, runs, live events, releases) and the live dashboard."""
