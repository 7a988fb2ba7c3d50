"""A scale's *looks*: the seed counts at which its verdicts may be read, as its manifest declares them
(``seeds: 3``, ``{first: 3, max: 8}`` or ``{looks: [3, 5, 8]}``). What a verdict at a look spends is
:mod:`repro.claims.sequential`'s; the manifest only names the looks, so they live here, below claims/."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Looks:
    """The seed counts at which a scale's verdicts may be read, in order (one: no sequential design)."""

    counts: tuple[int, ...]
    declared: str = ""  # how the manifest wrote them, for the page

    @property
    def sequential(self) -> bool:
        return len(self.counts) > 1

    def reached(self, seeds: int) -> int:
        """The index of the look ``seeds`` stored seeds reach (the first look when short of it)."""
        return max([0] + [i for i, n in enumerate(self.counts) if n <= seeds])

    def text(self) -> str:
        return self.declared or ", ".join(map(str, self.counts))


def looks_of(value: object) -> Looks:
    """A manifest's ``seeds`` value (an int, ``{first, max}`` or ``{looks: [...]}``, validated before) as
    :class:`Looks`."""
    if isinstance(value, dict) and "looks" in value:
        counts = tuple(int(n) for n in value["looks"])
        return Looks(counts, f"looks {', '.join(map(str, counts))}")
    if isinstance(value, dict):
        first, last = int(value["first"]), int(value["max"])
        return Looks(tuple(range(first, last + 1)), f"looks {first} to {last} (every added seed)")
    return Looks((int(value),))
