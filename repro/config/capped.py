"""A run capped by ``--max-steps N``: the same spec trained for fewer steps, a run of its own (its id changes
with the spec). ``repro run`` trains it; ``repro report --max-steps N`` reports it, labelled capped."""

from __future__ import annotations

from dataclasses import replace

from repro.config.spec import RunSpec


def with_max_steps(spec: RunSpec, max_steps: int | None) -> RunSpec:
    """Cap the training length (a different run: the id changes with the spec)."""
    if max_steps is None or max_steps >= spec.train.steps:
        return spec
    return replace(spec, train=spec.train.model_copy(update={"steps": max_steps}))


def label(max_steps: int) -> str:
    """How a capped report names its runs wherever it shows them."""
    return f"capped at {max_steps:,} steps"
