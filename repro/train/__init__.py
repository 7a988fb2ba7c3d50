"""Training a run: the runner, the Lightning pieces, evaluation, probes, launchers (stored runs trained
again to check or replace them: repro.replay; generation from a trained run: repro.sample)."""
