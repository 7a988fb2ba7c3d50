"""The numbers a run's ``summary.json`` stores, by family: what a claim may select (``docs/store.md`` says
what each means). ``repro validate`` refuses a claim naming another (a typo would otherwise be judged
"not evaluable" for ever) and warns where a metric counts a grid key by construction."""

from __future__ import annotations

import difflib
import re

from repro.families import adaptive_span

COMMON = (
    "valid_bits",
    "test_bits",
    "unigram_bits",
    "valid_targets",
    "test_targets",
    "params",
    "flops_per_token",
    "steps",
    "train_tokens",
    "train_seconds",
    "eval_seconds",
    "seconds_per_step",
    "model_flops_per_second",
    "peak_flops_per_second",
    "mfu",
    "peak_memory_bytes",
    "cpus",
    "load_average_max",
    "load_average_mean",
    "others_cores_max",
    "others_cores_mean",
    "steal_cores_max",
    "steal_cores_mean",
    "eval_min_context",
    "selected_step",
    "valid_gain_last_fifth",  # read from the curve when a claim names it (repro.report.derived)
)
FAMILY = {
    "adaptive_span": (
        "avg_span",  # mean over heads of the effective span min(S, z + R)
        "span_max",  # the longest head's z (tokens)
        "span_limit",
        "span_growth",  # avg_span minus its initial value (repro.families.adaptive_span, repro.report.derived)
        "span_lower_half",  # mean z of the lower half of the layers
        "span_upper_half",
        "dynamic_span_mean",
    ),
    "sparse_transformer": ("attn_keys_per_query",),
    "frontier": (  # the span metrics for its span attentions (window, adaptive, dynamic)
        "attn_keys_per_query",
        "avg_span",
        "span_max",
        "span_limit",
        "span_growth",
        "span_lower_half",
        "span_upper_half",
    ),
}
PATTERNS = {"sparse_transformer": (re.compile(r"test_bits_ctx\d+$"),)}  # st-table3: bits at each context
# a synthetic corpus's scores per dependency class (repro.data.synthetic; any family): bits and targets per
# split, the class's floor and the bits of a model blind at its distance, e.g. valid_bits.long
GROUPS = re.compile(r"((train|valid|test)_(bits|targets)|floor_bits|blind_bits)\.[a-z][a-z0-9]*$")
# metrics that count spec keys' values whatever the model learned: (the keys, why)
COUNTS = {"avg_span": ((adaptive_span.RAMP,), "the effective span min(S, z + R) adds R to z")}


def names(family: str | None) -> tuple[str, ...]:
    """Every metric a run of ``family`` stores (of every family when None)."""
    own = FAMILY.get(family, ()) if family else tuple(m for ms in FAMILY.values() for m in ms)
    return COMMON + own


def known(metric: str, family: str | None) -> bool:
    if metric in names(family) or GROUPS.match(metric):
        return True
    families = [family] if family else list(PATTERNS)
    return any(p.match(metric) for f in families for p in PATTERNS.get(f, ()))


def close(metric: str, family: str | None) -> list[str]:
    """The known names a typo is closest to (for the error's suggestion)."""
    return difflib.get_close_matches(metric, names(family), n=2, cutoff=0.6)


SPLIT_GAP = 0.05  # of the smaller: valid and test bits further apart than this are said to differ


def split_gap(valid: float | None, test: float | None) -> str | None:
    """Words for valid and test bits more than :data:`SPLIT_GAP` of the smaller apart (a corpus whose parts
    differ in kind: linux-doc's valid split reads 3.25 bits where its test split reads 2.74), which makes a
    number on one split no guide to the other; None when they are close, or one is missing."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (valid, test))
    if not numbers or valid != valid or test != test or min(valid, test) <= 0:  # missing, NaN, or not a number
        return None
    gap = abs(valid - test)
    if gap <= SPLIT_GAP * min(valid, test):
        return None
    return (
        f"valid {valid:.2f} and test {test:.2f} bits differ by {gap:.2f} ({gap / min(valid, test):.0%} of the "
        "smaller): the two splits are not alike (parts of the corpus that differ in kind), so compare runs on "
        "one split, never a valid number with a test one"
    )


# An MFU above 1 is more model FLOP/s than the machine's peak: the peak it was divided by was measured while
# others loaded the machine (repro.train.throughput.ABOVE_PEAK). Stored as it is, shown with this reason.
MFU_REASON = "peak measured under load"


def implausible_mfu(value: object) -> bool:
    """Whether ``value`` is an MFU above 1 (a number; NaN, None and text are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and value > 1


def mfu_text(shown: str, values: list) -> str:
    """An MFU as a report shows it: ``shown`` (its number formatted, or a cell's mean ± sd) and, where any of
    ``values`` (the run's MFU, or each seed's of the cell) is above 1, why it is not a number to trust."""
    above = sum(implausible_mfu(v) for v in values)
    if not above:
        return shown
    seeds = f"{above} of {len(values)} seeds above 1, " if len(values) > 1 else ""
    return f"{shown} (implausible: {seeds}{MFU_REASON})"
