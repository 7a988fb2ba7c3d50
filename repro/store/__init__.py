"""The run store: a run's directory, its files and checkpoints."""
