"""Training a run: the runner, the Lightning pieces, evaluation, probes, launchers."""
