"""What scoring the released weights costs, said before it starts (``repro run --scale pretrained``: its
``--dry-run``, its first lines, the error of a dataset not prepared): the files it downloads, the hours it
takes on 2 CPU cores, and ``--limit-bytes`` for a quick look. No torch here.

The hours come from a measurement (docs/pretrained.md, "How long it takes"): the 38M shape scores a block
of 8 x 512 tokens in 51-70 s on 2 CPU cores shared with other jobs; each split is scored twice (the
official protocol and the suite's own); a model's ``cost`` scales that (the 209M models: about 5 times).
"""

from __future__ import annotations

from collections.abc import Sequence

from repro.config.spec import RunSpec
from repro.pretrained import released

SECONDS_PER_TOKEN = 60 / (8 * 512)  # the 38M shape, one protocol, 2 CPU cores (measured: 51-70 s a block)
SPLIT_TOKENS = 5_000_000  # text8's and enwik8's valid and test splits (the official 90M / 5M / 5M)
PROTOCOLS = 2  # the official protocol and the suite's own, both stored


def seconds(spec: RunSpec) -> float:
    """About how long scoring ``spec``'s released weights takes on 2 CPU cores (``eval.prefix`` counted)."""
    tokens = min(spec.eval.prefix or SPLIT_TOKENS, SPLIT_TOKENS) * len(spec.eval.splits)
    return tokens * PROTOCOLS * SECONDS_PER_TOKEN * released.released(spec.train.weights.name).cost


def about(seconds: float) -> str:
    """``about 17 days``, ``about 81 hours``, ``about 20 minutes``: an estimate, rounded as one."""
    if seconds >= 48 * 3600:
        return f"about {seconds / 86400:.0f} days"
    return (
        f"about {seconds / 3600:.0f} hours" if seconds >= 2 * 3600 else f"about {max(1, round(seconds / 60))} minutes"
    )


def note(specs: Sequence[RunSpec], data_root=None) -> str:
    """What scoring the released weights of ``specs`` does, as a verb phrase ("" when none scores any): what
    it downloads (and what is already here), how long each takes, and the quick look (or that it is one)."""
    scored = {s.train.weights.name: s for s in specs if s.train.weights is not None and s.train.weights.name}
    if not scored:
        return ""
    here = released.folder(data_root)
    new = [f"{n}.pt" for n in scored if not (here / f"{n}.pt").is_file()]
    got = [f"{n}.pt" for n in scored if (here / f"{n}.pt").is_file()]
    files = (
        f"downloads {' and '.join(new)} from {released.url_root()}/ into {here}/" if new else "downloads nothing"
    ) + (f" ({' and '.join(got)} already there)" if got else "")
    times = ", ".join(f"{n}.pt {about(seconds(s))}" for n, s in scored.items())
    prefixes = sorted({s.eval.prefix for s in scored.values() if s.eval.prefix})
    scope = (
        f"each split's first {' or '.join(f'{p:,}' for p in prefixes)} tokens (--limit-bytes)"
        if prefixes
        else f"{' and '.join(next(iter(scored.values())).eval.splits)}, {SPLIT_TOKENS / 1e6:.0f}M tokens each, by two protocols"
    )
    quick = "" if prefixes else "; `--limit-bytes N` scores each split's first N tokens for a quick look"
    return (
        f"{files}; scoring {scope} takes {times} on 2 CPU cores (measured on shared "
        f"cores: idle ones are 2-4 times faster){quick}"
    )
