"""Experiment tracking: W&B and trackio loggers, the dashboard, sync and pull."""
