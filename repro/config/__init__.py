"""Manifests and the typed run specs they expand to (no torch)."""
