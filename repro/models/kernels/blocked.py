"""CPU sparse attention: every part of the pattern dense where it is computed, through torch's fused
CPU flash attention, merged exactly through the log-sum-exps.

For each part of :data:`repro.models.patterns.PARTS` the :mod:`plan <repro.models.kernels.plan>` says
how it lies in its layout (n a multiple of the stride l, nb = n / l blocks); views of q, k, v (no
copies) turn it into batches of ordinary attention for the fused kernel
(``aten::_scaled_dot_product_flash_attention_for_cpu``, which returns the log-sum-exp, and its backward):

* ``own``: the blocks as a batch of nb sequences of l (``is_causal`` when the part is causal inside the
  block, else an l x l additive mask);
* ``previous``: query block a against key block a - 1, likewise;
* ``residue``: position a*l + r viewed as (r, a), residue-major: causal attention over each residue
  class of nb positions, queries shifted by the plan's k (keys at least k strides back);
* ``earlier``: each head's summary columns gathered into nb*c' keys; query block a attends to the
  first a*c' of them (no mask, nothing computed twice).

Parts merge in place into one output and log-sum-exp (lse = logaddexp, out = sum_p out_p exp(lse_p - lse));
in the backward every part's fused backward gets the *merged* output and log-sum-exp and returns its
share of the union softmax's gradient. Work is chunked so temporaries stay a few MiB: no n x n tensor,
no loop over tokens (loops run over chunks of blocks or residues, and over query blocks for ``earlier``).
"""
from __future__ import annotations

import math

import torch

from repro.models import patterns as P
from repro.models.kernels.plan import Plan, plan

_FWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_BWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
# elements of one chunk of queries (batch x heads x rows x dim) per fused call: 4 MiB in float32
CHUNK_ELEMENTS = 2 ** 20
NEG_INF = float("-inf")


def _chunks(total: int, per_item: int):
    g = max(1, CHUNK_ELEMENTS // max(1, per_item))
    for s in range(0, total, g):
        yield s, min(total, s + g)


def _merge(o, lse, op, lp, first: bool) -> None:
    """Fold one part's (op, lp) into the running (o, lse) views, in place."""
    if first:
        o.copy_(op)
        lse.copy_(lp)
        return
    new = torch.logaddexp(lse, lp)
    fin = new.masked_fill(new.isneginf(), 0.0)
    o.mul_(torch.exp(lse - fin).unsqueeze(-1)).add_(op.mul_(torch.exp(lp - fin).unsqueeze(-1)))
    lse.copy_(new)


class _Run:
    """One part on one head group: ``forward`` folds the part into (o, lse); ``backward`` adds its
    gradients into (dq, dk, dv). All tensors (B, H, n, .) in natural order, lse (B, H, n)."""

    def __init__(self, p: Plan, l: int):
        self.plan, self.l = p, l

    def forward(self, q, k, v, o, lse, scale, first):  # pragma: no cover - interface
        raise NotImplementedError

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):  # pragma: no cover - interface
        raise NotImplementedError


class _Tiles(_Run):
    """``own`` and ``previous``: query block a against key block a - off, batched over blocks."""

    def _setup(self, q):
        B, H, n, d = q.shape
        p, l = self.plan, self.l
        self.off = 0 if p.layout == "own" else 1
        self.mask = self.empty = None
        if p.kind == "masked":
            m = torch.tensor(p.mask)
            bias = torch.zeros(m.shape, dtype=q.dtype).masked_fill_(~m, NEG_INF)  # (H or 1, l, l)
            empty = torch.tensor(p.empty_rows)  # (H or 1, l)
            if bias.shape[0] > 1:  # per head: one mask per (batch, head), broadcast over blocks
                bias, empty = bias[None].expand(B, H, l, l).reshape(B * H, l, l), empty[None].expand(B, H, l).reshape(B * H, l)
            self.mask, self.empty = bias[:, None].to(q.device), empty[:, None].to(q.device)
        return B * H, n // l

    def _view(self, t, BH, nb):
        return t.view(BH, nb, self.l, *t.shape[3:])

    def forward(self, q, k, v, o, lse, scale, first):
        BH, nb = self._setup(q)
        qb, kb, vb, ob, lb = (self._view(t, BH, nb) for t in (q, k, v, o, lse))
        for a0, a1 in _chunks(nb - self.off, BH * self.l * q.shape[-1]):
            a0, a1 = a0 + self.off, a1 + self.off
            ks = slice(a0 - self.off, a1 - self.off)
            op, lp = _FWD(qb[:, a0:a1], kb[:, ks], vb[:, ks], 0.0, self.plan.kind == "causal",
                          attn_mask=self.mask, scale=scale)
            if self.empty is not None:
                lp.masked_fill_(self.empty, NEG_INF)
            _merge(ob[:, a0:a1], lb[:, a0:a1], op, lp, first)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):
        BH, nb = self._setup(q)
        qb, kb, vb, ob, lb, dob, dqb, dkb, dvb = (self._view(t, BH, nb) for t in (q, k, v, o, lse, do, dq, dk, dv))
        for a0, a1 in _chunks(nb - self.off, BH * self.l * q.shape[-1]):
            a0, a1 = a0 + self.off, a1 + self.off
            ks = slice(a0 - self.off, a1 - self.off)
            gq, gk, gv = _BWD(dob[:, a0:a1], qb[:, a0:a1], kb[:, ks], vb[:, ks], ob[:, a0:a1], lb[:, a0:a1], 0.0,
                              self.plan.kind == "causal", attn_mask=self.mask, scale=scale)
            dqb[:, a0:a1] += gq
            dkb[:, ks] += gk
            dvb[:, ks] += gv


class _Residues(_Run):
    """``residue``: causal attention within each residue class, queries shifted by the plan's k."""

    def _view(self, t):  # (B, H, n, ...) -> (B*H, l, nb, ...), residue-major, a view
        B, H, n = t.shape[:3]
        return t.view(B * H, n // self.l, self.l, *t.shape[3:]).transpose(1, 2)

    def forward(self, q, k, v, o, lse, scale, first):
        s = self.plan.shift
        qr, kr, vr, orr, lr = (self._view(t) for t in (q, k, v, o, lse))
        nb = qr.shape[2]
        for r0, r1 in _chunks(self.l, qr.shape[0] * nb * q.shape[-1]):
            op, lp = _FWD(qr[:, r0:r1, s:], kr[:, r0:r1, :nb - s], vr[:, r0:r1, :nb - s], 0.0, True, scale=scale)
            _merge(orr[:, r0:r1, s:], lr[:, r0:r1, s:], op, lp, first)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):
        s = self.plan.shift
        qr, kr, vr, orr, lr, dor, dqr, dkr, dvr = (self._view(t) for t in (q, k, v, o, lse, do, dq, dk, dv))
        nb = qr.shape[2]
        for r0, r1 in _chunks(self.l, qr.shape[0] * nb * q.shape[-1]):
            gq, gk, gv = _BWD(dor[:, r0:r1, s:], qr[:, r0:r1, s:], kr[:, r0:r1, :nb - s], vr[:, r0:r1, :nb - s],
                              orr[:, r0:r1, s:], lr[:, r0:r1, s:], 0.0, True, scale=scale)
            dqr[:, r0:r1, s:] += gq
            dkr[:, r0:r1, :nb - s] += gk
            dvr[:, r0:r1, :nb - s] += gv


class _Earlier(_Run):
    """``earlier``: query block a against the gathered columns of blocks 0..a-1."""

    def _gather(self, k, v):
        """Gathered keys and values (B, H, nb*c', .), their index (1, H, nb*c', 1) and c'."""
        B, H, n, _ = k.shape
        offs = torch.as_tensor(self.plan.offsets, device=k.device)  # (H, c')
        nb, cc = n // self.l, offs.shape[1]
        idx = (torch.arange(nb, device=k.device)[:, None] * self.l + offs[:, None, :]).reshape(1, H, nb * cc, 1)
        take = lambda t: torch.gather(t, 2, idx.expand(B, H, nb * cc, t.shape[-1]))  # noqa: E731
        return take(k), take(v), idx, cc

    def forward(self, q, k, v, o, lse, scale, first):
        ks, vs, _, cc = self._gather(k, v)
        l = self.l
        for a in range(1, q.shape[2] // l):
            rows = slice(a * l, (a + 1) * l)
            op, lp = _FWD(q[:, :, rows], ks[:, :, :a * cc], vs[:, :, :a * cc], 0.0, False, scale=scale)
            _merge(o[:, :, rows], lse[:, :, rows], op, lp, first)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):
        ks, vs, idx, cc = self._gather(k, v)
        dks, dvs = torch.zeros_like(ks), torch.zeros_like(vs)
        l = self.l
        for a in range(1, q.shape[2] // l):
            rows, keys = slice(a * l, (a + 1) * l), slice(0, a * cc)
            gq, gk, gv = _BWD(do[:, :, rows], q[:, :, rows], ks[:, :, keys], vs[:, :, keys], o[:, :, rows],
                              lse[:, :, rows], 0.0, False, scale=scale)
            dq[:, :, rows] += gq
            dks[:, :, keys] += gk
            dvs[:, :, keys] += gv
        dk.scatter_add_(2, idx.expand_as(dks), dks)
        dv.scatter_add_(2, idx.expand_as(dvs), dvs)


_RUNNERS = {"own": _Tiles, "previous": _Tiles, "residue": _Residues, "earlier": _Earlier}


def runs_for(pattern: str, l: int, c: int | None, ranks, nb: int) -> list[_Run]:
    """The runs computing ``pattern`` for heads of the given summary ranks, read from the parts table."""
    out = []
    for part in P.parts(pattern):
        p = plan(part, pattern, l, c, tuple(ranks), nb)
        if p.kind == "empty":
            continue
        if p.layout not in _RUNNERS:
            raise ValueError(f"the CPU kernel has no layout {p.layout!r} (part {part} of {pattern!r})")
        out.append(_RUNNERS[p.layout](p, l))
    return out


class PartsAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, runs, scale):
        B, H, n, _ = q.shape
        o = q.new_zeros(B, H, n, v.shape[-1])
        lse = q.new_full((B, H, n), NEG_INF)
        for i, run in enumerate(runs):
            run.forward(q, k, v, o, lse, scale, first=i == 0)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.runs, ctx.scale = runs, scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        lse = lse.masked_fill(lse.isneginf(), 0.0)  # rows without keys: every part's P is 0 there
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for run in ctx.runs:
            run.backward(do, q, k, v, o, lse, ctx.scale, dq, dk, dv)
        return dq, dk, dv, None, None


def _flat_ok(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when (B, H, n, d) views as (B*H, n, d) (every layout is then a view), else a copy."""
    try:
        t.view(-1, *t.shape[2:])
        return t
    except RuntimeError:
        return t.contiguous()


def blocked_attention(q, k, v, pattern: str, stride: int, c: int | None = None, ranks=None,
                      scale: float | None = None):
    """Sparse attention of one head group on CPU; q, k (B, H, n, dk), v (B, H, n, dv); head h uses summary
    rank ``ranks[h]`` (default h). Any n: padded to a multiple of ``stride`` (padding sits after every
    real position, so causality hides it). Half-precision inputs are computed in float32."""
    if q.device.type != "cpu":
        raise ValueError(f"attention impl 'blocked' runs on CPU, got a {q.device.type} tensor (use 'flex' on CUDA)")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    dtype = q.dtype
    if dtype in (torch.float16, torch.bfloat16):
        q, k, v = q.float(), k.float(), v.float()
    n, l = q.shape[2], stride
    pad = (-n) % l
    if pad:
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    dv = v.shape[-1]
    if q.shape[-1] != dv:  # the fused kernel wants one head size: zero columns change no score, no output
        w = max(q.shape[-1], dv)
        q, k, v = (torch.nn.functional.pad(t, (0, w - t.shape[-1])) for t in (q, k, v))
    q, k, v = _flat_ok(q), _flat_ok(k), _flat_ok(v)
    ranks = list(range(q.shape[1])) if ranks is None else list(ranks)
    runs = runs_for(pattern, l, c, ranks, q.shape[2] // l)
    with torch.autocast("cpu", enabled=False):
        o = PartsAttention.apply(q, k, v, runs, scale)
    return o[:, :, :n, :dv].to(dtype)
