"""What a run computed, whatever names it (issue 52.4). The run id hashes a spec as written; the
*computation key* hashes it canonicalised, so that specs that train the same model on the same batches and
score the same weights hash alike: such runs are one result, trained once (:func:`provides`, used by the
store's settling) and counted once (the report's multiplicity).

Two rewrites, each exact in arithmetic: the same parameters drawn from the same generator in the same
order, the same operations on them, the same batches. What may differ is the rounding of kernels that
sum in another order (a fused q/k/v product, another attention kernel): the stored pairs agree within
4e-7 relative, as runs on two CPU vendors do (docs/reproducibility.md).

1. **A frontier run of a Sparse Transformer attention is that Sparse Transformer.** ``model.family:
   frontier`` with ``attention`` dense, strided or fixed and ``positions: factorized`` is the
   ``sparse_transformer`` family with ``pattern`` = that attention and the same layers, width, heads,
   feed-forward, dropout, init_std, stride, c and combination, its ``attn`` embedding (rows i // l and
   columns i mod l of the frontier's factorised positions), ``qk_mult`` 1, ``impl`` auto and its default
   ``normal`` initialisation: both draw the token, row and column embeddings, then per layer W_q, W_k,
   W_v (the frontier's as one fused matrix, the same draws), W_p, W1, W2, then the output layer, all
   N(0, init_std) with W2 and W_p at init_std / sqrt(2 N); both compute H' = H + a(H), H'' = H' +
   ff(norm(H')) with f(x) = x sigmoid(1.702 x) and drop the embeddings and each branch (Child et al. 2019,
   section 5.2). The frontier's span and globals keys are read by other attentions only.
2. **Keys that measure without changing what is trained or scored** are left out: ``train.log_every``
   (how often train bits are logged), ``train.checkpoint_every`` (when the state is saved; nothing is
   drawn), ``train.val_every`` and ``train.val_tokens`` (quick validations run in eval mode, without
   gradients or random draws) unless ``train.select`` is ``best_valid`` (then they choose the weights
   scored), ``eval.splits`` and ``eval.context_sweep`` (evaluations of the final weights, each apart from
   the others), and the Sparse Transformer's ``checkpointing`` (recomputation in the backward pass, which
   gives the same activations).

Every other key counts: a seed, a stride, the thread count or the precision make another computation.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from repro.identity import identity

FRONTIER_PATTERNS = ("dense", "strided", "fixed")
SHARED = ("layers", "d_model", "heads", "ff_mult", "dropout", "init_std", "stride", "c", "combine")
MEASURES = {"train": ("log_every", "checkpoint_every", "val_every", "val_tokens"), "eval": ("splits", "context_sweep")}
QUICK_VALIDATION = ("val_every", "val_tokens")


def canonical(spec: dict[str, Any]) -> dict[str, Any]:
    """The sections of a resolved spec (or a stored spec.yaml) that decide its numbers, in one form for
    every spec of the same computation (the rewrites of this module's docstring)."""
    out = copy.deepcopy(identity(spec))
    model, train, evaluation = out["model"] or {}, out["train"] or {}, out["eval"] or {}
    if model.get("family") == "frontier" and _sparse_transformer(model):
        shared = {k: model[k] for k in SHARED if k in model}
        model = {"family": "sparse_transformer", **shared, "pattern": model["attention"], "embedding": "attn"}
        model.update(qk_mult=1.0, impl="auto")
    model.pop("checkpointing", None)
    scored = train.get("select") == "best_valid"
    for key in MEASURES["train"]:
        if not (scored and key in QUICK_VALIDATION):
            train.pop(key, None)
    for key in MEASURES["eval"]:
        evaluation.pop(key, None)
    return {**out, "model": model, "train": train, "eval": evaluation}


def computation(spec: dict[str, Any]) -> str:
    """The computation key of a resolved spec or a stored spec.yaml: the first 12 hex digits of the sha256
    of :func:`canonical` as canonical JSON."""
    blob = json.dumps(canonical(spec), sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def provides(source: dict[str, Any], target: dict[str, Any]) -> bool:
    """Whether a finished run of spec ``source`` stores everything a run of ``target`` would: the same
    computation, every split and swept context the target scores, the same logged and quick-validated
    steps (its curves), and the same model family, or a frontier target (a frontier run stores its summary
    only, no figure arrays, and its model statistics are the structure's: the equal model's)."""
    if computation(source) != computation(target):
        return False
    s_train, t_train = source.get("train") or {}, target.get("train") or {}
    s_eval, t_eval = source.get("eval") or {}, target.get("eval") or {}
    same_curves = all(s_train.get(k) == t_train.get(k) for k in ("log_every", *QUICK_VALIDATION))
    scored = all(set(t_eval.get(k) or ()) <= set(s_eval.get(k) or ()) for k in MEASURES["eval"])
    family = target["model"]["family"]
    return same_curves and scored and family in (source["model"]["family"], "frontier")


def _sparse_transformer(model: dict[str, Any]) -> bool:
    """Whether a frontier model is a Sparse Transformer: one of its attentions on its factorised positions."""
    return model.get("attention") in FRONTIER_PATTERNS and model.get("positions") == "factorized"
