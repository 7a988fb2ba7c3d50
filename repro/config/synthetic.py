"""The ``data.synthetic`` section: a generated corpus with known long-range structure (the ``probe`` scale's
mechanism checks, :mod:`repro.data.synthetic`). Its generator, parameters and seed are part of the spec,
so of the run id; each generator takes its own keys and refuses the others'."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, model_validator

from repro.config.fields import Float, Int, Section, later, refuse

MAX_TOKENS = 100_000_000
OWN = {  # the keys each generator needs; any other generator's key is refused
    "periodic": ("distance",),
    "mix": ("distances", "stretch"),
    "grid": ("rows", "width"),
    "copy": ("record", "segment", "back"),
}


class SyntheticSpec(Section):
    generator: Literal["periodic", "mix", "grid", "copy"]
    seed: Int = Field(0, ge=0, le=2**32 - 1)  # the corpus's own seed (train.seed seeds the model)
    tokens: Int = Field(2_000_000, ge=10_000, le=MAX_TOKENS)  # the whole stream, split 90/5/5
    symbols: Int = Field(256, ge=2, le=4096)  # the alphabet (grid: levels; copy: segments + filler halves)
    keep: Float = Field(0.9, ge=0, le=1)  # probability that a dependent token equals its source
    distance: Int | None = later(None, ge=1)  # periodic: D
    distances: list[Annotated[Int, Field(ge=1)]] | None = later(None)  # mix: the distances, one per stretch
    stretch: Int | None = later(None, ge=1)  # mix: tokens per stretch of one distance
    rows: Int | None = later(None, ge=2)  # grid
    width: Int | None = later(None, ge=1)  # grid: the row length, the distance to the pixel above
    record: Int | None = later(None, ge=4)  # copy: tokens per record
    segment: Int | None = later(None, ge=1)  # copy: symbols per fresh segment
    back: Int | None = later(None, ge=1)  # copy: how many records back the copied segment lies

    @model_validator(mode="after")
    def _rules(self) -> SyntheticSpec:
        own = OWN[self.generator]
        for key in (k for keys in OWN.values() for k in keys):
            value = getattr(self, key)
            if key in own and value is None:
                raise refuse(f"generator {self.generator} needs {', '.join(own)}", key)
            if key not in own and value is not None:
                raise refuse(f"got {value!r}; generator {self.generator} takes {', '.join(own)}", key)
        if self.generator == "copy" and 2 * self.segment > self.record:
            raise refuse(f"got {self.segment}; allowed: at most record / 2 = {self.record // 2}", "segment")
        if self.generator in ("copy", "mix") and self.symbols < 4:
            raise refuse(f"got {self.symbols}; allowed: >= 4", "symbols")
        if self.reach * 40 > self.tokens:  # each 5% split must hold many sources in view
            raise refuse(f"got {self.tokens}; allowed: >= 40 x the longest distance ({self.reach})", "tokens")
        return self

    @property
    def reach(self) -> int:
        """The longest distance a token depends on."""
        return {
            "periodic": lambda: self.distance,
            "mix": lambda: max(self.distances),
            "grid": lambda: self.rows * self.width + 1,
            "copy": lambda: (self.back + 1) * self.record,
        }[self.generator]()

    @property
    def label(self) -> str:
        """The corpus in words, e.g. ``periodic distance=128 seed=0``."""
        own = " ".join(f"{k}={getattr(self, k)}" for k in OWN[self.generator])
        return f"{self.generator} {own} seed={self.seed}"

    def option(self) -> str:
        """What ``repro.data.open_split`` is passed: the set keys as canonical JSON (hashable, and the
        generator's cache key)."""
        return json.dumps(self.model_dump(exclude_none=True), sort_keys=True, separators=(",", ":"))
