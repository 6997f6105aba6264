"""Capture service: plans a scan into pose batches and captures each batch."""
