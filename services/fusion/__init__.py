"""Fusion service: fuses a run's LiDAR chunks into the semantic instance cloud."""
