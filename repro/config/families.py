"""The ``model`` section of each model family: its keys, defaults and bounds (no torch: a manifest is
checked without the model). ``FAMILIES`` maps ``model.family`` to its schema; the model that a schema
configures is ``repro.models.<family>`` (``repro.models.family``), whose docstring explains the keys.
The rules between a family's keys (heads divide the widths, the fixed pattern's c fits its stride) are
its schema's model validators, here, so a model is never built from a configuration that breaks them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from repro.config.fields import Float, Int, Section, expect, later, refuse
from repro.config.keys import show
from repro.registry import Plugin, Registry


class SparseTransformerConfig(Section):
    layers: Int = Field(4, ge=1)
    d_model: Int = Field(256, ge=1)
    heads: Int = Field(4, ge=1)
    ff_mult: Float = Field(4.0, gt=0)  # W1 output = ff_mult * d_model
    qk_mult: Float = Field(1.0, gt=0)  # query/key width = qk_mult * d_model (values stay d_model)
    dropout: Float = Field(0.0, ge=0, lt=1)  # at the end of each residual branch (the paper uses no attention dropout)
    pattern: Literal["dense", "strided", "fixed"] = "dense"
    stride: Int = Field(128, ge=1)  # l; also the row length of the ``attn`` position embedding
    c: Int | None = Field(32, ge=1)  # summary positions per block (fixed)
    combine: Literal["interleaved", "merged", "multihead"] = "merged"
    embedding: Literal["attn", "data"] = "attn"
    checkpointing: bool = False  # recompute each residual block in the backward pass
    impl: Literal["auto", "blocked", "flex", "masked"] = "auto"
    init_std: Float = Field(0.02, gt=0)  # base std of weights and embeddings (W2, Wp: init_std / sqrt(2N))
    init: Literal["normal", "paper"] = later("normal")  # see repro.models.sparse_transformer
    dropout_embedding: bool = later(True)  # also drop the summed embeddings (the paper does not)

    @model_validator(mode="after")
    def _rules(self) -> SparseTransformerConfig:
        _split_heads(self, {"d_model": self.d_model, "qk_mult": round(self.d_model * self.qk_mult)})
        if self.pattern == "fixed" and (self.c is None or self.c > self.stride):
            raise refuse(f"got {self.c!r}; allowed: 1 to model.stride = {self.stride} (the fixed pattern)", "c")
        if self.pattern != "dense" and self.combine == "multihead" and self.heads < 2:
            raise refuse(f"got {self.heads}; allowed: >= 2 with combine: multihead", "heads")
        return self


class SpanConfig(Section):
    kind: Literal["fixed", "adaptive", "dynamic"] = "adaptive"
    limit: Int = Field(8192, ge=1)  # S, the maximum span
    ramp: Int = Field(32, ge=1)  # R, the width of the soft mask's ramp
    loss_coef: Float = Field(2.0e-6, ge=0)  # lambda
    loss_mode: Literal["mean_times_S", "sum"] = "mean_times_S"
    init: Float = Field(0.0, ge=0, le=1)  # initial z' (z = S z')
    dynamic_bias_init: Float = -4.0  # b of z_t = S sigmoid(v . x_t + b)


WINDOW_NAMES = {"paper": "self_and_past", "official": "past"}  # model.window's names before 2026-12-03
Window = Annotated[Literal["self_and_past", "past"], BeforeValidator(lambda v: WINDOW_NAMES.get(v, v))]


class AdaptiveSpanConfig(Section):
    layers: Int = Field(12, ge=1)
    d_model: Int = Field(512, ge=1)
    d_ff: Int = Field(2048, ge=1)
    heads: Int = Field(8, ge=1)
    dropout: Float = Field(0.3, ge=0, lt=1)  # on attention weights and ReLU outputs
    init: Literal["official", "paper"] = "official"  # W_q, W_k, W_v, W_o: see repro.models.adaptive_span
    # which distances query t sees (repro.models.adaptive_span): ``self_and_past`` r = t-S+1 .. t, ``past``
    # eq. 5's r = t-S .. t-1; ``paper`` and ``official``, their names before, are read and hashed by run ids
    window: Window = later("self_and_past", id_names={"self_and_past": "paper", "past": "official"})
    # how the soft mask enters the weights (repro.models.adaptive_span): ``eq5`` a = m exp(s) / sum m exp(s);
    # ``official`` the official code's softmax, then the mask, then renormalised with + 1e-8 (imported models)
    mask_norm: Literal["eq5", "official"] = later("eq5")
    span: SpanConfig = Field(default_factory=SpanConfig)
    # train the fixed and adaptive spans' layers under torch.compile (repro.models.adaptive_span): the same
    # model, other rounding, so a new run id; off (the default) leaves the id out, eager as every stored run
    compile: bool = later(False)

    @model_validator(mode="after")
    def _rules(self) -> AdaptiveSpanConfig:
        _split_heads(self, {"d_model": self.d_model})
        if self.mask_norm == "official" and self.span.kind == "dynamic":
            raise refuse(
                "got 'official'; allowed: eq5 with span.kind: dynamic (the official code has no dynamic span)",
                "mask_norm",
            )
        return self


# The frontier's attentions, in the frontier's order (its manifest's variants, `grid: {variant: {each:
# model.attention}}`): one module each under repro/models/attentions/, imported only to build a model
# (repro.models.attentions.build), so that a manifest is checked without torch.
ATTENTIONS: Registry[Plugin] = Registry(
    "attention",
    [
        Plugin(name, f"repro.models.attentions.{name}")
        for name in ("dense", "window", "adaptive", "dynamic", "strided", "fixed", "longformer")
    ],
)
Attention = Annotated[
    str,
    expect(
        lambda v: isinstance(v, str) and v in ATTENTIONS,
        lambda v: f"expected one of {', '.join(sorted(ATTENTIONS))}, got {show(v)}",
    ),
]


class FrontierConfig(Section):
    """One backbone for every attention of both papers (repro.models.frontier): only ``attention`` and its
    own keys change between the frontier's cells."""

    layers: Int = Field(4, ge=1)
    d_model: Int = Field(128, ge=1)
    heads: Int = Field(4, ge=1)
    ff_mult: Float = Field(4.0, gt=0)
    dropout: Float = Field(0.0, ge=0, lt=1)  # at the end of each residual branch
    init_std: Float = Field(0.02, gt=0)
    attention: Attention = "dense"
    span: SpanConfig = Field(
        default_factory=SpanConfig
    )  # window / adaptive / dynamic / longformer: S (limit), R, lambda
    stride: Int = Field(128, ge=1)  # strided / fixed: l
    c: Int = Field(32, ge=1)  # fixed: summary positions per block
    combine: Literal["interleaved", "merged", "multihead"] = "merged"  # strided / fixed
    globals: Int = Field(16, ge=0)  # longformer: the first g positions are keys of every query
    # absolute: one learned embedding per position; factorized: the Sparse Transformer's row and column ones
    positions: Literal["absolute", "factorized"] = later("absolute")

    @model_validator(mode="after")
    def _rules(self) -> FrontierConfig:
        _split_heads(self, {"d_model": self.d_model})
        return self


def _split_heads(model: Section, widths: dict[str, int]) -> None:
    """Each width (a key: the width it gives) splits into ``model.heads`` equal heads."""
    for key, width in widths.items():
        if width < model.heads or width % model.heads:
            raise refuse(
                f"got {getattr(model, key)!r}: a width of {width} does not split into model.heads = "
                f"{model.heads} equal heads; allowed: a multiple of {model.heads}",
                key,
            )


FAMILIES: dict[str, type[Section]] = {
    "sparse_transformer": SparseTransformerConfig,
    "adaptive_span": AdaptiveSpanConfig,
    "frontier": FrontierConfig,
}
