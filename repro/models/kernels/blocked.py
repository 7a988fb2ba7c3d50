"""CPU sparse attention: every part of the pattern dense where it is computed, through torch's fused
CPU flash attention, merged exactly through the log-sum-exps.

For each part of :data:`repro.models.patterns.PARTS` the :mod:`plan <repro.models.kernels.plan>` says
how it lies in its layout (n a multiple of the stride l, nb = n / l blocks); views of q, k, v (no
copies) turn it into batches of ordinary attention for the fused kernel
(``aten::_scaled_dot_product_flash_attention_for_cpu``, which returns the log-sum-exp, and its backward):

* ``own``: the blocks as a batch of nb sequences of l (``is_causal`` when the part is causal inside the
  block, else an additive mask, the tile cropped to the rows and columns the mask uses);
* ``previous``: query block a against key block a - 1, likewise;
* ``residue``: position a*l + r viewed as (r, a), residue-major: causal attention over each residue
  class of nb positions, queries shifted by the plan's k (keys at least k strides back);
* ``earlier``: each head's summary columns gathered into nb*c' keys; query block a attends to the
  first a*c' of them; a few query blocks share one call, with a mask on the staircase between them.

Parts merge in place into one output and log-sum-exp (lse = logaddexp, out = sum_p out_p exp(lse_p - lse));
in the backward every part's fused backward gets the *merged* output and log-sum-exp and returns its
share of the union softmax's gradient. Work is chunked so temporaries stay a few MiB: no n x n tensor,
no loop over tokens (loops run over chunks of blocks or residues, and over groups of query blocks for
``earlier``).
"""

from __future__ import annotations

import math

import torch

from repro.models import patterns as P
from repro.models.kernels.plan import Plan, plan

_FWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_BWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
# elements of one chunk of queries (batch x heads x rows x dim) per fused call: 4 MiB in float32
CHUNK_ELEMENTS = 2**20
# query rows per call of the ``earlier`` part: the fused kernel tiles 768 rows or more 256 at a time;
# measured at n=8192, l=128: about a quarter less time than one 128-row block per call, masked staircase
# included
ROWS_PER_CALL = 1024
NEG_INF = float("-inf")


def _chunks(total: int, per_item: int):
    g = max(1, CHUNK_ELEMENTS // max(1, per_item))
    for s in range(0, total, g):
        yield s, min(total, s + g)


def _merge(o, lse, op, lp, first: bool) -> None:
    """Fold one part's (op, lp) into the running (o, lse) views, in place (``first``: they are empty)."""
    if first:
        o.copy_(op)
        lse.copy_(lp)
        return
    new = torch.logaddexp(lse, lp)
    fin = new.masked_fill(new.isneginf(), 0.0)
    o.mul_(torch.exp(lse - fin).unsqueeze(-1)).addcmul_(op, torch.exp(lp - fin).unsqueeze(-1))
    lse.copy_(new)


def _accumulate(dst, grads, first: bool) -> None:
    """Add one call's gradients into the views ``dst`` (``first``: copy them in)."""
    for d, g in zip(dst, grads):
        if first:
            d.copy_(g)
        else:
            d += g


class _Run:
    """One part on one head group: ``forward`` folds the part into (o, lse); ``backward`` adds its
    gradients into (dq, dk, dv) (``first``: copies them into uninitialised buffers; only a run that
    :meth:`covers_all` rows goes first). All tensors (B, H, n, .) in natural order, lse (B, H, n)."""

    def __init__(self, p: Plan, l: int):
        self.plan, self.l = p, l

    def forward(self, q, k, v, o, lse, scale, first):  # pragma: no cover - interface
        raise NotImplementedError

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv, first):  # pragma: no cover - interface
        raise NotImplementedError

    def covers_all(self) -> bool:
        """Does the backward write every row of dq, dk and dv?"""
        return False


class _Tiles(_Run):
    """``own`` and ``previous``: query block a against key block a - off, batched over blocks; a masked
    tile is cropped to the rows and columns its mask uses."""

    def _setup(self, q):
        B, H, n, d = q.shape
        p, l = self.plan, self.l
        self.off = 0 if p.layout == "own" else 1
        self.mask = self.empty = None
        self.rows = self.cols = slice(0, l)
        if p.kind == "masked":
            m = torch.tensor(p.mask)  # (H or 1, l, l)
            r, s = torch.nonzero(m.any(0).any(1))[:, 0], torch.nonzero(m.any(0).any(0))[:, 0]
            self.rows, self.cols = slice(int(r[0]), int(r[-1]) + 1), slice(int(s[0]), int(s[-1]) + 1)
            m = m[:, self.rows, self.cols]
            bias = torch.zeros(m.shape, dtype=q.dtype).masked_fill_(~m, NEG_INF)
            empty = ~m.any(-1)
            if bias.shape[0] > 1:  # per head: one mask per (batch, head), broadcast over the blocks
                bias = bias[None].expand(B, *bias.shape).reshape(B * H, *bias.shape[1:])
                empty = empty[None].expand(B, *empty.shape).reshape(B * H, -1)
            self.mask, self.empty = bias[:, None].to(q.device), empty[:, None].to(q.device)
        return B * H, n // l

    def _calls(self, ts, q):
        """Per chunk of blocks: (B*H, blocks, rows, .) views of ``ts`` on the query side and on the key side."""
        BH, nb = self._setup(q)
        views = [t.view(BH, nb, self.l, *t.shape[3:]) for t in ts]
        for a0, a1 in _chunks(nb - self.off, BH * self.l * q.shape[-1]):
            qs, ks = (slice(a0 + self.off, a1 + self.off), self.rows), (slice(a0, a1), self.cols)
            yield [v[(slice(None), *qs)] for v in views], [v[(slice(None), *ks)] for v in views]

    def covers_all(self) -> bool:
        return self.plan.layout == "own" and self.plan.kind in ("causal", "full")

    def forward(self, q, k, v, o, lse, scale, first):
        for (qc, _, _, oc, lc), (_, kc, vc, _, _) in self._calls((q, k, v, o, lse), q):
            op, lp = _FWD(qc, kc, vc, 0.0, self.plan.kind == "causal", attn_mask=self.mask, scale=scale)
            if self.empty is not None:
                lp.masked_fill_(self.empty, NEG_INF)
            _merge(oc, lc, op, lp, first)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv, first):
        for (qc, _, _, oc, lc, doc, dqc, _, _), (_, kc, vc, _, _, _, _, dkc, dvc) in self._calls(
            (q, k, v, o, lse, do, dq, dk, dv), q
        ):
            grads = _BWD(doc, qc, kc, vc, oc, lc, 0.0, self.plan.kind == "causal", attn_mask=self.mask, scale=scale)
            _accumulate((dqc, dkc, dvc), grads, first)


class _Residues(_Run):
    """``residue``: causal attention within each residue class, queries shifted by the plan's k."""

    def _view(self, t):  # (B, H, n, ...) -> (B*H, l, nb, ...), residue-major, a view
        B, H, n = t.shape[:3]
        return t.view(B * H, n // self.l, self.l, *t.shape[3:]).transpose(1, 2)

    def covers_all(self) -> bool:
        return self.plan.shift == 0

    def forward(self, q, k, v, o, lse, scale, first):
        s = self.plan.shift
        qr, kr, vr, orr, lr = (self._view(t) for t in (q, k, v, o, lse))
        nb = qr.shape[2]
        for r0, r1 in _chunks(self.l, qr.shape[0] * nb * q.shape[-1]):
            op, lp = _FWD(qr[:, r0:r1, s:], kr[:, r0:r1, : nb - s], vr[:, r0:r1, : nb - s], 0.0, True, scale=scale)
            _merge(orr[:, r0:r1, s:], lr[:, r0:r1, s:], op, lp, first)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv, first):
        s = self.plan.shift
        qr, kr, vr, orr, lr, dor, dqr, dkr, dvr = (self._view(t) for t in (q, k, v, o, lse, do, dq, dk, dv))
        nb = qr.shape[2]
        for r0, r1 in _chunks(self.l, qr.shape[0] * nb * q.shape[-1]):
            grads = _BWD(
                dor[:, r0:r1, s:],
                qr[:, r0:r1, s:],
                kr[:, r0:r1, : nb - s],
                vr[:, r0:r1, : nb - s],
                orr[:, r0:r1, s:],
                lr[:, r0:r1, s:],
                0.0,
                True,
                scale=scale,
            )
            _accumulate((dqr[:, r0:r1, s:], dkr[:, r0:r1, : nb - s], dvr[:, r0:r1, : nb - s]), grads, first)


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

    def _groups(self, q, idx, cc):
        """Query blocks [a0, a1) per call, with keys [0, (a1 - 1) c') and the additive mask of the
        ``earlier`` layout there (the staircase), None for a single block (all its keys count)."""
        B, H, n, d = q.shape
        l, nb = self.l, n // self.l
        g = max(1, min(ROWS_PER_CALL // l, CHUNK_ELEMENTS // (B * H * l * d)))
        for a0 in range(1, nb, g):
            a1 = min(nb, a0 + g)
            kend, mask = (a1 - 1) * cc, None
            if a1 - a0 > 1:
                i = torch.arange(a0 * l, a1 * l, device=q.device)
                inside = P.LAYOUTS["earlier"](i[:, None], idx[0, 0, None, :kend, 0], P.Geometry(l))
                mask = torch.zeros(1, 1, len(i), kend, dtype=q.dtype, device=q.device).masked_fill_(~inside, NEG_INF)
            yield slice(a0 * l, a1 * l), slice(0, kend), mask

    def forward(self, q, k, v, o, lse, scale, first):
        ks, vs, idx, cc = self._gather(k, v)
        for rows, keys, mask in self._groups(q, idx, cc):
            op, lp = _FWD(q[:, :, rows], ks[:, :, keys], vs[:, :, keys], 0.0, False, attn_mask=mask, scale=scale)
            _merge(o[:, :, rows], lse[:, :, rows], op, lp, first)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv, first):
        ks, vs, idx, cc = self._gather(k, v)
        dks, dvs = torch.zeros_like(ks), torch.zeros_like(vs)
        for rows, keys, mask in self._groups(q, idx, cc):
            gq, gk, gv = _BWD(
                do[:, :, rows],
                q[:, :, rows],
                ks[:, :, keys],
                vs[:, :, keys],
                o[:, :, rows],
                lse[:, :, rows],
                0.0,
                False,
                attn_mask=mask,
                scale=scale,
            )
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
        first = bool(ctx.runs) and ctx.runs[0].covers_all()  # the first run copies in: no zero fill
        new = torch.empty_like if first else torch.zeros_like
        dq, dk, dv = new(q), new(k), new(v)
        for i, run in enumerate(ctx.runs):
            run.backward(do, q, k, v, o, lse, ctx.scale, dq, dk, dv, first and i == 0)
        return dq, dk, dv, None, None


def _flat_ok(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when (B, H, n, d) views as (B*H, n, d) (every layout is then a view), else a copy."""
    try:
        t.view(-1, *t.shape[2:])
        return t
    except RuntimeError:
        return t.contiguous()


def blocked_attention(q, k, v, pattern: str, stride: int, c: int | None = None, ranks=None, scale: float | None = None):
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
