"""Labeller service: constrained auto-labelling of landmarks through a swappable model endpoint."""
