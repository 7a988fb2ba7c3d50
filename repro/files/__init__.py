"""Durable, safe file primitives: atomic writes, advisory locks, bounded YAML."""
