"""Blocked/chunked sparse attention for CPU (works on any device), forward and backward.

Never builds an n x n tensor. A pattern is a union of *parts*, each a batch of small dense masked
attentions on a rearranged view of the sequence (n a multiple of the stride l, nb = n / l blocks):

* ``band``    (strided's local half, i - l < j <= i): query block a against key blocks a-1 and a,
  an (l x 2l) mask;
* ``stride``  (strided's stride half, (i - j) mod l == 0): the residue-major transpose, position
  i = a*l + r viewed as (r, a), makes it a causal dense attention over nb positions per residue;
* ``block``   (fixed's own-block half): query block a against key block a, an (l x l) causal mask;
* ``summary`` (fixed's summary half): the c summary keys of every block gathered per head
  (nb*c keys), queries chunked by block so a query block only meets the summaries before it.

``merged`` unions the parts in ONE softmax: each part returns its output and log-sum-exp, the
outputs are combined with weights exp(lse_part - lse_total); keys in two parts are counted once
(the stride part excludes j = i when unioned with the band, the summary part excludes the query's
own block when unioned with the block part). The backward is a custom autograd Function in the
flash-attention style: it recomputes each part's scores chunk by chunk and uses the *global*
log-sum-exp and D = rowsum(dO * O), so memory stays O(n d) plus one chunk of scores.
"""
from __future__ import annotations

import math

import torch

# Upper bound on the number of score elements of one chunk (B*H*rows*keys). Peak extra memory is a
# few chunks' worth (scores, probabilities, dP): 2**21 float32 elements = 8 MiB each. Bigger chunks
# mean fewer parallel regions, which matters on an oversubscribed CPU.
CHUNK_ELEMENTS = 2 ** 21
NEG_INF = float("-inf")


def _chunks(total: int, per_item: int, budget: int):
    g = max(1, budget // max(1, per_item))
    for s in range(0, total, g):
        yield s, min(total, s + g)


def _bias(nmask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask: 0 where allowed, -inf where ``nmask`` (disallowed)."""
    return torch.zeros(nmask.shape, dtype=dtype, device=nmask.device).masked_fill_(nmask, NEG_INF)


def _fwd_core(q, k, v, bias):
    """(o, lse) of masked softmax attention on batched small problems; ``q`` is pre-scaled, ``bias``
    the additive mask. Rows without any allowed key give o = 0, lse = -inf. Few full-size ops: on a
    shared machine every parallel region of an oversubscribed OpenMP pool costs a time slice."""
    s = torch.matmul(q, k.transpose(-1, -2)).add_(bias)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = s.sub_(torch.nan_to_num(lse, neginf=0.0)).exp_()
    return torch.matmul(p, v), lse.squeeze(-1)


def _bwd_core(q, k, v, bias, lse, dsum, do):
    """Gradients of one part given the global lse (..., rows, 1) (finite) and D = rowsum(dO * O);
    ``q`` is pre-scaled, so the returned dq still needs the factor ``scale``."""
    s = torch.matmul(q, k.transpose(-1, -2)).add_(bias)
    p = s.sub_(lse).exp_()
    dv = torch.matmul(p.transpose(-1, -2), do)
    dp = torch.matmul(do, v.transpose(-1, -2)).sub_(dsum)
    ds = p.mul_(dp)
    return torch.matmul(ds, k), torch.matmul(ds.transpose(-1, -2), q), dv


class _Part:
    """One part of a pattern. ``forward`` -> (o, lse) in natural layout; ``backward`` accumulates
    into dq (unscaled), dk, dv. ``q`` is pre-scaled."""

    def __init__(self, l: int):
        self.l = l

    def forward(self, q, k, v):  # pragma: no cover - interface
        raise NotImplementedError

    def backward(self, q, k, v, lse, dsum, do, dq, dk, dv):  # pragma: no cover - interface
        raise NotImplementedError


class Band(_Part):
    """i - l < j <= i: query block a against key blocks (a-1, a)."""

    def _biases(self, t):
        l = self.l
        r = torch.arange(l, device=t.device)[:, None]
        jj = torch.arange(2 * l, device=t.device)[None, :]
        ok = (jj > r) & (jj <= r + l)
        return _bias(~ok, t.dtype), _bias(~(ok & (jj >= l)), t.dtype)  # any block / first block (no previous)

    def _keys(self, t, g0, g1):
        B, H, n, d = t.shape
        l, g = self.l, g1 - g0
        cur = t[:, :, g0 * l:g1 * l].reshape(B, H, g, l, d)
        if g0 > 0:
            prev = t[:, :, (g0 - 1) * l:(g1 - 1) * l].reshape(B, H, g, l, d)
        else:
            prev = torch.cat([t.new_zeros(B, H, l, d), t[:, :, :(g1 - 1) * l]], dim=2).reshape(B, H, g, l, d)
        return torch.cat([prev, cur], dim=3)

    def _bias_for(self, g0, g1, biases):
        b, b0 = biases
        if g0 > 0:
            return b
        m = b.expand(g1 - g0, *b.shape).clone()
        m[0] = b0
        return m

    def forward(self, q, k, v):
        B, H, n, dk = q.shape
        l, nb = self.l, n // self.l
        o = q.new_empty(B, H, n, v.shape[-1])
        lse = q.new_empty(B, H, n)
        biases = self._biases(q)
        for g0, g1 in _chunks(nb, B * H * l * 2 * l, CHUNK_ELEMENTS):
            qc = q[:, :, g0 * l:g1 * l].reshape(B, H, g1 - g0, l, dk)
            oc, lc = _fwd_core(qc, self._keys(k, g0, g1), self._keys(v, g0, g1), self._bias_for(g0, g1, biases))
            o[:, :, g0 * l:g1 * l] = oc.reshape(B, H, -1, oc.shape[-1])
            lse[:, :, g0 * l:g1 * l] = lc.reshape(B, H, -1)
        return o, lse

    def backward(self, q, k, v, lse, dsum, do, dq, dk, dv):
        B, H, n, d = q.shape
        l, nb = self.l, n // self.l
        biases = self._biases(q)
        for g0, g1 in _chunks(nb, B * H * l * 2 * l, CHUNK_ELEMENTS):
            g, sl = g1 - g0, slice(g0 * l, g1 * l)
            qc = q[:, :, sl].reshape(B, H, g, l, d)
            gq, gk, gv = _bwd_core(qc, self._keys(k, g0, g1), self._keys(v, g0, g1), self._bias_for(g0, g1, biases),
                                   lse[:, :, sl].reshape(B, H, g, l, 1), dsum[:, :, sl].reshape(B, H, g, l, 1),
                                   do[:, :, sl].reshape(B, H, g, l, -1))
            dq[:, :, sl] += gq.reshape(B, H, g * l, -1)
            for grad, acc in ((gk, dk), (gv, dv)):
                acc[:, :, sl] += grad[:, :, :, l:].reshape(B, H, g * l, -1)
                prev = grad[:, :, :, :l].reshape(B, H, g * l, -1)
                if g0 > 0:
                    acc[:, :, (g0 - 1) * l:(g1 - 1) * l] += prev
                else:
                    acc[:, :, :(g1 - 1) * l] += prev[:, :, l:]


class Block(_Part):
    """j // l == i // l (causal): query block a against key block a."""

    def _run(self, q, k, v, bwd=None):
        B, H, n, d = q.shape
        l, nb = self.l, n // self.l
        r = torch.arange(l, device=q.device)
        bias = _bias(r[None, :] > r[:, None], q.dtype)
        out = None if bwd else (q.new_empty(B, H, n, v.shape[-1]), q.new_empty(B, H, n))
        for g0, g1 in _chunks(nb, B * H * l * l, CHUNK_ELEMENTS):
            g, sl = g1 - g0, slice(g0 * l, g1 * l)
            qc, kc, vc = (t[:, :, sl].reshape(B, H, g, l, -1) for t in (q, k, v))
            if bwd is None:
                oc, lc = _fwd_core(qc, kc, vc, bias)
                out[0][:, :, sl] = oc.reshape(B, H, g * l, -1)
                out[1][:, :, sl] = lc.reshape(B, H, g * l)
            else:
                lse, dsum, do, dq, dk, dv = bwd
                grads = _bwd_core(qc, kc, vc, bias, lse[:, :, sl].reshape(B, H, g, l, 1),
                                  dsum[:, :, sl].reshape(B, H, g, l, 1), do[:, :, sl].reshape(B, H, g, l, -1))
                for grad, acc in zip(grads, (dq, dk, dv)):
                    acc[:, :, sl] += grad.reshape(B, H, g * l, -1)
        return out

    def forward(self, q, k, v):
        return self._run(q, k, v)

    def backward(self, q, k, v, lse, dsum, do, dq, dk, dv):
        self._run(q, k, v, (lse, dsum, do, dq, dk, dv))


class Stride(_Part):
    """(i - j) mod l == 0, j <= i (j < i when ``strict``): causal attention per residue r = i mod l
    over the nb positions a = i // l (the residue-major transpose)."""

    def __init__(self, l: int, strict: bool = False):
        super().__init__(l)
        self.strict = strict

    def _rm(self, t):  # (B, H, n, d) -> (B, H, l, nb, d) view
        B, H, n, d = t.shape
        return t.view(B, H, n // self.l, self.l, d).transpose(2, 3)

    def _run(self, q, k, v, bwd=None):
        B, H, n, d = q.shape
        l, nb = self.l, n // self.l
        a = torch.arange(nb, device=q.device)
        bias = _bias((a[None, :] >= a[:, None]) if self.strict else (a[None, :] > a[:, None]), q.dtype)
        qr, kr, vr = self._rm(q), self._rm(k), self._rm(v)
        if bwd is None:
            o, lse = q.new_empty(B, H, n, v.shape[-1]), q.new_empty(B, H, n)
            orr, lr = self._rm(o), lse.view(B, H, nb, l).transpose(2, 3)
        else:
            lse, dsum, do, dq, dk, dv = bwd
            lr, dr = lse.view(B, H, nb, l).transpose(2, 3), dsum.view(B, H, nb, l).transpose(2, 3)
            dor, dqr, dkr, dvr = self._rm(do), self._rm(dq), self._rm(dk), self._rm(dv)
        for r0, r1 in _chunks(l, B * H * nb * nb, CHUNK_ELEMENTS):
            qc, kc, vc = qr[:, :, r0:r1], kr[:, :, r0:r1], vr[:, :, r0:r1]
            if bwd is None:
                oc, lc = _fwd_core(qc, kc, vc, bias)
                orr[:, :, r0:r1] = oc
                lr[:, :, r0:r1] = lc
            else:
                grads = _bwd_core(qc, kc, vc, bias, lr[:, :, r0:r1, :, None], dr[:, :, r0:r1, :, None],
                                  dor[:, :, r0:r1])
                for grad, acc in zip(grads, (dqr, dkr, dvr)):
                    acc[:, :, r0:r1] += grad
        return None if bwd else (o, lse)

    def forward(self, q, k, v):
        return self._run(q, k, v)

    def backward(self, q, k, v, lse, dsum, do, dq, dk, dv):
        self._run(q, k, v, (lse, dsum, do, dq, dk, dv))


class Summary(_Part):
    """j mod l in [lo_h, lo_h + c) for head h, j <= i (key block < query block when ``strict``)."""

    def __init__(self, l: int, c: int, lo: list[int], strict: bool = False):
        super().__init__(l)
        self.c, self.lo, self.strict = c, lo, strict

    def _index(self, nb, device):
        base = (torch.arange(nb, device=device)[:, None] * self.l + torch.arange(self.c, device=device)[None, :])
        lo = torch.tensor(self.lo, device=device)
        return lo[:, None] + base.reshape(1, -1)  # (H, nb*c) key positions per head

    def _chunks(self, nb, per_row):
        """Query-block chunks [g0, g1) sized by the keys they actually meet (a staircase)."""
        g0 = 0
        while g0 < nb:
            g1 = g0 + 1
            while g1 < nb and (g1 + 1 - g0) * self.l * (g1 + 1) * self.c * per_row <= CHUNK_ELEMENTS:
                g1 += 1
            yield g0, g1
            g0 = g1

    def _run(self, q, k, v, bwd=None):
        B, H, n, d = q.shape
        l, c, nb = self.l, self.c, n // self.l
        idx = self._index(nb, q.device)
        gk = lambda t: torch.gather(t, 2, idx[None, :, :, None].expand(B, H, nb * c, t.shape[-1]))  # noqa: E731
        ks, vs = gk(k), gk(v)
        if bwd is None:
            o, lse = q.new_zeros(B, H, n, v.shape[-1]), q.new_full((B, H, n), NEG_INF)
        else:
            lse, dsum, do, dq, dk, dv = bwd
            dks, dvs = torch.zeros_like(ks), torch.zeros_like(vs)
        for g0, g1 in self._chunks(nb, B * H):
            kend = (g1 - 1 if self.strict else g1) * c
            if kend == 0:
                continue
            sl = slice(g0 * l, g1 * l)
            i = torch.arange(g0 * l, g1 * l, device=q.device)
            if self.strict:
                bias = _bias((torch.arange(kend, device=q.device)[None, :] // c) >= (i[:, None] // l), q.dtype)
            else:
                bias = _bias(idx[:, None, :kend] > i[None, :, None], q.dtype)  # (H, rows, keys)
            if bwd is None:
                oc, lc = _fwd_core(q[:, :, sl], ks[:, :, :kend], vs[:, :, :kend], bias)
                o[:, :, sl] = oc
                lse[:, :, sl] = lc
            else:
                gq, gks, gvs = _bwd_core(q[:, :, sl], ks[:, :, :kend], vs[:, :, :kend], bias,
                                         lse[:, :, sl, None], dsum[:, :, sl, None], do[:, :, sl])
                dq[:, :, sl] += gq
                dks[:, :, :kend] += gks
                dvs[:, :, :kend] += gvs
        if bwd is None:
            return o, lse
        dk.scatter_add_(2, idx[None, :, :, None].expand(B, H, nb * c, dk.shape[-1]), dks)
        dv.scatter_add_(2, idx[None, :, :, None].expand(B, H, nb * c, dv.shape[-1]), dvs)
        return None

    def forward(self, q, k, v):
        return self._run(q, k, v)

    def backward(self, q, k, v, lse, dsum, do, dq, dk, dv):
        self._run(q, k, v, (lse, dsum, do, dq, dk, dv))


def parts_for(pattern: str, l: int, c: int | None, heads: int) -> list[_Part]:
    """The parts whose union (one softmax, no key counted twice) is ``pattern`` on ``heads`` heads
    (head h of the group uses summary sub-block h)."""
    from repro.models.patterns import summary_offsets

    lo = [summary_offsets(l, c, h)[0] for h in range(heads)] if pattern in ("fixed", "summary") else None
    if pattern == "local":
        return [Band(l)]
    if pattern == "stride":
        return [Stride(l)]
    if pattern == "strided":
        return [Band(l), Stride(l, strict=True)]
    if pattern == "block":
        return [Block(l)]
    if pattern == "summary":
        return [Summary(l, c, lo)]
    if pattern == "fixed":
        return [Block(l), Summary(l, c, lo, strict=True)]
    raise ValueError(f"blocked kernel has no parts for pattern {pattern!r}")


class BlockedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, parts, scale):
        with torch.no_grad():
            qs = q * scale
            outs = [p.forward(qs, k, v) for p in parts]
            if len(outs) == 1:
                o, lse = outs[0]
            else:
                lse = torch.logsumexp(torch.stack([x[1] for x in outs]), dim=0)
                safe = torch.nan_to_num(lse, neginf=0.0)
                o = outs[0][0].mul_(torch.exp(outs[0][1] - safe).unsqueeze(-1))
                for op, lp in outs[1:]:
                    o.add_(op.mul_(torch.exp(lp - safe).unsqueeze(-1)))
                del outs
        ctx.save_for_backward(qs, k, v, o, lse)
        ctx.parts, ctx.scale = parts, scale
        return o

    @staticmethod
    def backward(ctx, do):
        qs, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        with torch.no_grad():
            safe = torch.nan_to_num(lse, neginf=0.0)
            dsum = (do * o).sum(-1)
            dq, dk, dv = torch.zeros_like(qs), torch.zeros_like(k), torch.zeros_like(v)
            for p in ctx.parts:
                p.backward(qs, k, v, safe, dsum, do, dq, dk, dv)
            dq.mul_(ctx.scale)
        return dq, dk, dv, None, None


def blocked_attention(q, k, v, pattern: str, stride: int, c: int | None = None, scale: float | None = None):
    """Sparse attention of one head group; q, k (B, H, n, dk), v (B, H, n, dv); any n (padded to a
    multiple of ``stride`` internally: padding sits after every real position, so causality hides it)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    n, l = q.shape[2], stride
    pad = (-n) % l
    if pad:
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    with torch.autocast(q.device.type, enabled=False):
        o = BlockedAttention.apply(q, k, v, parts_for(pattern, l, c, q.shape[1]), scale)
    return o[:, :, :n] if pad else o
