"""A fixed window of S keys: each query sees itself and the S - 1 positions before it (the adaptive-span
paper's fixed-span baseline, ``span.limit`` = S; no mask, no parameter)."""

from repro.models.attentions._band import SpanBand


class Attention(SpanBand):
    kind = "fixed"
