"""Renderer service: camera views (and later flight videos) from the simulator, for any requester."""
