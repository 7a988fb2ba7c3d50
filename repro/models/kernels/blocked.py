"""CPU sparse attention: every part of the pattern dense where it is computed, through torch's fused
CPU flash attention, merged exactly through the log-sum-exps.

q, k, v are viewed as S = batch x heads sequences (S, n, .) of nb = n / l blocks (n a multiple of the
stride l; sequence s is head s mod heads). For each part of :data:`repro.models.patterns.PARTS` the
:mod:`plan <repro.models.kernels.plan>` says how it lies in its layout, and views (no copies) turn it into
batches of ordinary attention for the fused kernel (``aten::_scaled_dot_product_flash_attention_for_cpu``,
which returns the log-sum-exp, and its backward). The kernel lays its outputs and gradients out as
(batch, rows, heads, dim), so each layout puts positions where that order is the sequence's own:

* ``own``: the blocks as the kernel's batch, one head of l rows (``is_causal`` when the part is causal
  inside the block, else an additive mask; see :func:`_crop`);
* ``previous``: query block a against key block a - 1, likewise;
* ``own`` and ``previous`` together, where :func:`~repro.models.kernels.plan.window` plans them: tiles
  of h = l / :data:`WINDOW_SPLIT` queries against the l + h keys ending with the tile (overlapping
  views), l + h keys per query where an own and a previous tile compute 2l (the fused kernel costs as
  much for a causal l x l tile as for a full one);
* ``residue``: position a*l + r viewed as (r, a), the residues as the kernel's heads: causal attention
  over each residue class of nb positions, queries shifted by the plan's k (keys at least k strides back);
* ``earlier``: each head's summary columns gathered into nb*c' keys; query block a attends to the
  first a*c' of them; a few query blocks share one call, with a mask on the staircase between them.

A part that covers every row (the own block causal or full, a residue class unshifted) runs first, once
over all sequences: its output, log-sum-exp and gradients are the buffers the other parts fold into (no
zero fill, no copy). The others merge in place (lse = logaddexp, out moves toward the part's output by its
share of the softmax mass); in the backward every part's fused backward gets the *merged* output and
log-sum-exp and returns its share of the union softmax's gradient, added in place. They run per sequence
in chunks, so temporaries stay a few MiB: no n x n tensor, no loop over tokens (loops run over
sequences and chunks of blocks, tiles or residues, and over groups of query blocks for ``earlier``).
"""

from __future__ import annotations

import math

import torch

from repro.models import patterns as P
from repro.models.kernels.plan import Plan, plan, window

_FWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_BWD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
# elements of one chunk (query rows, or key rows of the windows, x dim) per fused call: 4 MiB in float32
CHUNK_ELEMENTS = 2**20
# query rows per call of the ``earlier`` part (whole blocks). Fewer rows compute less of the masked
# staircase (a group of g blocks computes (g - 1) c'/2 columns per row that its mask then drops) and hold
# smaller temporaries; 128-row calls run the fused kernel's small-tile path (32-row tiles). Measured at
# n=8192, l=128, c=16 (fwd+bwd CPU seconds of the whole pattern, shared machine): 1024 rows 1.00, 512 and
# 384 rows 0.96, 256 rows 0.97-1.02, 128 rows 1.04; the backward's peak above the other buffers 27 MiB at
# 1024 rows, 21 MiB at 512
ROWS_PER_CALL = 512
NEG_INF = float("-inf")
# query tiles of the ``own`` + ``previous`` window: l / WINDOW_SPLIT rows, each against l + l/WINDOW_SPLIT
# keys (more rows per tile: larger matrix products, more scores computed beyond the l the band allows)
WINDOW_SPLIT = 2
# blocks per sequence up to which the unshifted residue classes (nb positions each) are computed by
# offsets (:meth:`_Residues._few_first`): the fused kernel's cost per attention problem dominates there
# (n = 512, l = 128: S x 128 problems of 4 x 4 scores)
SMALL_RESIDUE = 16


def _chunks(total: int, per_item: int, start: int = 0):
    g = max(1, CHUNK_ELEMENTS // max(1, per_item))
    for s in range(start, total, g):
        yield s, min(total, s + g)


def _merge(o, lse, op, lp) -> None:
    """Fold one part's (op, lp) into the running (o, lse) views, in place: lse becomes logaddexp(lse, lp)
    and o moves toward op by the part's share of the softmax mass, exp(lp - new lse)."""
    new = torch.logaddexp(lse, lp)
    share = torch.exp(lp - new.masked_fill(new.isneginf(), 0.0))
    o.lerp_(op, share.unsqueeze(-1))
    lse.copy_(new)


def _accumulate(dst, grads) -> None:
    for d, g in zip(dst, grads):
        d += g


class _Run:
    """One part on all S sequences: ``forward`` folds it into (o, lse), ``backward`` adds its gradients
    into (dq, dk, dv); a run that :meth:`covers_all` rows may instead go ``first``, creating them. All
    tensors (S, n, .) in natural order, lse (S, n)."""

    def __init__(self, p: Plan, l: int):
        self.plan, self.l = p, l

    def covers_all(self) -> bool:
        return False

    def first(self, q, k, v, scale):  # pragma: no cover - interface
        raise NotImplementedError

    def first_backward(self, do, q, k, v, o, lse, scale):  # pragma: no cover - interface
        raise NotImplementedError

    def forward(self, q, k, v, o, lse, scale):  # pragma: no cover - interface
        raise NotImplementedError

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):  # pragma: no cover - interface
        raise NotImplementedError


def _crop(used: torch.Tensor) -> slice:
    """The range of a tile's axis that its mask ``used``, when that drops a quarter of the axis or more;
    else the whole axis (a cropped tile is no longer a whole block: the fused kernel's tails and copies
    cost more than a few rows or columns save)."""
    i = torch.nonzero(used)[:, 0]
    first, last = int(i[0]), int(i[-1]) + 1
    return slice(first, last) if 4 * (last - first) <= 3 * len(used) else slice(0, len(used))


class _Tiles(_Run):
    """``own`` and ``previous``: query block a against key block a - off of the same sequence, the blocks
    as the fused kernel's batch (masked tiles cropped by :func:`_crop`)."""

    def __init__(self, p: Plan, l: int):
        super().__init__(p, l)
        self.off = 0 if p.layout == "own" else 1
        self.rows = self.cols = slice(0, l)
        self.mask = None  # (heads or 1, rows, cols) bool
        if p.kind == "masked":
            m = torch.tensor(p.mask)
            self.rows, self.cols = _crop(m.any(0).any(1)), _crop(m.any(0).any(0))
            self.mask = m[:, self.rows, self.cols]

    def covers_all(self) -> bool:
        return self.off == 0 and self.plan.kind in ("causal", "full")

    def _blocks(self, t):
        """All S*nb blocks of ``t`` (S, n, .) as the kernel's batch: (S*nb, 1, l, .), a view."""
        return t.view(-1, 1, self.l, *t.shape[2:])

    def first(self, q, k, v, scale):
        S, n, _ = q.shape
        o, lse = _FWD(*(self._blocks(t) for t in (q, k, v)), 0.0, self.plan.kind == "causal", scale=scale)
        return o.view(S, n, -1), lse.view(S, n)

    def first_backward(self, do, q, k, v, o, lse, scale):
        S, n, _ = q.shape
        grads = _BWD(*(self._blocks(t) for t in (do, q, k, v, o, lse)), 0.0, self.plan.kind == "causal", scale=scale)
        return tuple(g.view(S, n, -1) for g in grads)

    def _bias(self, like):
        """Additive masks (heads or 1, 1, 1, rows, cols) and their empty rows (heads or 1, 1, 1, rows)."""
        if self.mask is None:
            return None, None
        bias = torch.zeros(self.mask.shape, dtype=like.dtype).masked_fill_(~self.mask, NEG_INF)
        return bias[:, None, None].to(like.device), (~self.mask.any(-1))[:, None, None].to(like.device)

    def _calls(self, ts, S, nb, d):
        """Per sequence and chunk of query blocks: (sequence, query-side views, key-side views), each
        (blocks, 1, rows or cols, .) of the tensors ``ts`` (S, n, .)."""
        for s in range(S):
            seqs = [t[s].view(nb, self.l, *t.shape[2:]) for t in ts]
            for a0, a1 in _chunks(nb, self.l * d, self.off):
                qside = [t[a0:a1, self.rows].unsqueeze(1) for t in seqs]
                kside = [t[a0 - self.off : a1 - self.off, self.cols].unsqueeze(1) for t in seqs]
                yield s, qside, kside

    def forward(self, q, k, v, o, lse, scale):
        S, n, d = q.shape
        bias, empty = self._bias(q)
        for s, (qc, _, _, oc, lc), (_, kc, vc, _, _) in self._calls((q, k, v, o, lse), S, n // self.l, d):
            mask = None if bias is None else bias[s % len(bias)]
            op, lp = _FWD(qc, kc, vc, 0.0, self.plan.kind == "causal", attn_mask=mask, scale=scale)
            if empty is not None:
                lp.masked_fill_(empty[s % len(empty)], NEG_INF)
            _merge(oc, lc, op, lp)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):
        S, n, d = q.shape
        bias, _ = self._bias(q)
        ts = (q, k, v, o, lse, do, dq, dk, dv)
        for s, (qc, _, _, oc, lc, doc, dqc, _, _), (_, kc, vc, _, _, _, _, dkc, dvc) in self._calls(
            ts, S, n // self.l, d
        ):
            mask = None if bias is None else bias[s % len(bias)]
            grads = _BWD(doc, qc, kc, vc, oc, lc, 0.0, self.plan.kind == "causal", attn_mask=mask, scale=scale)
            _accumulate((dqc, dkc, dvc), grads)


class _Window(_Run):
    """``own`` and ``previous`` together (:func:`~repro.models.kernels.plan.window`): query tiles of h
    rows against the l + h keys ending with the tile (overlapping views of k and v), a sequence's tiles
    as the kernel's batch; the first block's tiles see their windows cut at position 0. Each key lies in
    l/h + 1 windows, and its gradient is folded back from them."""

    def __init__(self, p: Plan, l: int):
        super().__init__(p, l)
        self.mask = torch.tensor(p.mask)  # (1, h, l + h): every head's (plan.window)
        self.h = self.mask.shape[1]

    def _masks(self, like, cols=None):
        """The additive mask of columns ``cols``, shared by every sequence (1, 1, h, cols), and its rows
        without keys (1, 1, h)."""
        m = self.mask if cols is None else self.mask[..., cols]
        bias = torch.zeros(m.shape, dtype=like.dtype).masked_fill_(~m, NEG_INF)
        return bias[:, None].to(like.device), (~m.any(-1))[:, None].to(like.device)

    def _first(self, e):
        """Tile e of every sequence's first block: its rows, its keys [0, (e + 1) h) and their columns
        in the window."""
        h = self.h
        return slice(e * h, (e + 1) * h), slice(0, (e + 1) * h), slice(self.l - e * h, None)

    def _tiles(self, t, t0, t1):  # tiles [t0, t1) of sequences t (k, n, .): (k, t1 - t0, h, .)
        return t.view(t.shape[0], -1, self.h, *t.shape[2:])[:, t0:t1]

    def _windows(self, t, t0, t1):  # their keys in t (k, n, d): (k, t1 - t0, l + h, d), overlapping views
        rs = t.stride(1)
        size = (t.shape[0], t1 - t0, self.l + self.h, t.shape[2])
        start = t.storage_offset() + (t0 * self.h - self.l) * rs
        return t.as_strided(size, (t.stride(0), self.h * rs, rs, 1), start)

    def _calls(self, S, n, d):
        """(sequences, first tile, end tile) of every call on whole windows (tiles of the first block
        excluded), the sequences as the kernel's batch and their tiles as its heads: whole sequences
        together while their windows fit one chunk (few calls at short n), else one sequence's tiles in
        chunks."""
        tiles, first, per_tile = n // self.h, self.l // self.h, (self.l + self.h) * d
        if tiles <= first:  # one block: its tiles are the first block's (an empty call would crash the kernel)
            return
        if (tiles - first) * per_tile <= CHUNK_ELEMENTS:
            for s0, s1 in _chunks(S, (tiles - first) * per_tile):
                yield slice(s0, s1), first, tiles
            return
        for s in range(S):
            for t0, t1 in _chunks(tiles, per_tile, first):
                yield slice(s, s + 1), t0, t1

    def _fold(self, dst, g, t0):
        """Add the window gradients g (k, tiles, l + h, .) of tiles from t0 into dst (k, n, .): part j of
        tile t's window is key tile t - l/h + j."""
        back = self.l // self.h
        g = g.reshape(*g.shape[:2], back + 1, self.h, -1)
        dst = dst.view(dst.shape[0], -1, self.h, dst.shape[-1])
        for j in range(back + 1):
            dst[:, t0 - back + j : t0 - back + j + g.shape[1]] += g[:, :, j]

    def forward(self, q, k, v, o, lse, scale):
        S, n, d = q.shape
        for e in range(self.l // self.h):
            rows, keys, cols = self._first(e)
            bias, empty = self._masks(q, cols)
            op, lp = _FWD(q[:, None, rows], k[:, None, keys], v[:, None, keys], 0.0, False, attn_mask=bias, scale=scale)
            _merge(o[:, None, rows], lse[:, None, rows], op, lp.masked_fill_(empty, NEG_INF))
        bias, empty = self._masks(q)
        for ss, t0, t1 in self._calls(S, n, d):
            qc, kc, vc = self._tiles(q[ss], t0, t1), self._windows(k[ss], t0, t1), self._windows(v[ss], t0, t1)
            op, lp = _FWD(qc, kc, vc, 0.0, False, attn_mask=bias, scale=scale)
            _merge(self._tiles(o[ss], t0, t1), self._tiles(lse[ss], t0, t1), op, lp.masked_fill_(empty, NEG_INF))

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):
        S, n, d = q.shape
        for e in range(self.l // self.h):
            rows, keys, cols = self._first(e)
            bias, _ = self._masks(q, cols)
            ts = (do[:, None, rows], q[:, None, rows], k[:, None, keys], v[:, None, keys], o[:, None, rows])
            grads = _BWD(*ts, lse[:, None, rows], 0.0, False, attn_mask=bias, scale=scale)
            _accumulate((dq[:, None, rows], dk[:, None, keys], dv[:, None, keys]), grads)
        bias, _ = self._masks(q)
        for ss, t0, t1 in self._calls(S, n, d):
            qs = [self._tiles(t[ss], t0, t1) for t in (do, q, o, lse)]
            kc, vc = self._windows(k[ss], t0, t1), self._windows(v[ss], t0, t1)
            gq, gk, gv = _BWD(*qs[:2], kc, vc, *qs[2:], 0.0, False, attn_mask=bias, scale=scale)
            self._tiles(dq[ss], t0, t1).add_(gq)
            self._fold(dk[ss], gk, t0)
            self._fold(dv[ss], gv, t0)


class _Residues(_Run):
    """``residue``: causal attention within each residue class, queries shifted by the plan's k."""

    def _view(self, t):  # (S, n, ...) -> (S, l, nb, ...): residues as the kernel's heads, a view
        return t.view(t.shape[0], -1, self.l, *t.shape[2:]).transpose(1, 2)

    def covers_all(self) -> bool:
        return self.plan.shift == 0

    def _natural(self, t, S, n):  # (S, l, nb, .) -> (S, n, .)
        return t.transpose(1, 2).reshape(S, n, *t.shape[3:])

    def first(self, q, k, v, scale):
        S, n, _ = q.shape
        if n // self.l <= SMALL_RESIDUE:
            return self._few_first(q, k, v, scale)
        o, lse = _FWD(*(self._view(t) for t in (q, k, v)), 0.0, True, scale=scale)
        return self._natural(o, S, n), self._natural(lse, S, n)

    def first_backward(self, do, q, k, v, o, lse, scale):
        S, n, _ = q.shape
        if n // self.l <= SMALL_RESIDUE:
            return self._few_backward(do, q, k, v, o, lse, scale)
        grads = _BWD(*(self._view(t) for t in (do, q, k, v, o, lse)), 0.0, True, scale=scale)
        return tuple(self._natural(g, S, n) for g in grads)

    # Few blocks (nb <= SMALL_RESIDUE): query block a, residue r sees the keys of blocks a - j, j = 0..a,
    # at the same residue; per block offset j these are elementwise products of q's blocks j.. with k's
    # blocks ..nb-j (a loop over offsets, each over all sequences and positions), exact FLOPs, no tiny GEMMs.

    def _blocks(self, t):  # (S, n, .) -> (S, nb, l, .), a view
        return t.view(t.shape[0], -1, self.l, *t.shape[2:])

    def _offset_scores(self, qb, kb, j, scale):  # (S, nb - j, l): query blocks j.. against key blocks ..nb-j
        return (qb[:, j:] * kb[:, : qb.shape[1] - j]).sum(-1).mul_(scale)

    def _few_first(self, q, k, v, scale):
        qb, kb, vb = (self._blocks(t) for t in (q, k, v))
        S, nb, l, _ = qb.shape
        sc = q.new_full((S, nb, l, nb), NEG_INF)
        for j in range(nb):
            sc[:, j:, :, j] = self._offset_scores(qb, kb, j, scale)
        lse = torch.logsumexp(sc, -1)
        p = torch.exp(sc - lse.unsqueeze(-1))
        o = p[..., 0:1] * vb
        for j in range(1, nb):
            o[:, j:].addcmul_(p[:, j:, :, j : j + 1], vb[:, : nb - j])
        return o.view(S, -1, vb.shape[-1]), lse.view(S, -1)

    def _few_backward(self, do, q, k, v, o, lse, scale):
        """P = exp(s - lse), dS = P (dP - rowsum(dO O)), with the union's lse and O (merged)."""
        qb, kb, vb, dob, lb = (self._blocks(t) for t in (q, k, v, do, lse))
        nb = qb.shape[1]
        rows = (dob * self._blocks(o)).sum(-1)  # (S, nb, l)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dqb, dkb, dvb = (self._blocks(t) for t in (dq, dk, dv))
        for j in range(nb):
            p = torch.exp(self._offset_scores(qb, kb, j, scale) - lb[:, j:])
            ds = p * ((dob[:, j:] * vb[:, : nb - j]).sum(-1) - rows[:, j:])
            ds.mul_(scale)
            dqb[:, j:].addcmul_(ds.unsqueeze(-1), kb[:, : nb - j])
            dkb[:, : nb - j].addcmul_(ds.unsqueeze(-1), qb[:, j:])
            dvb[:, : nb - j].addcmul_(p.unsqueeze(-1), dob[:, j:])
        return dq, dk, dv

    def _calls(self, ts, d):
        """Per sequence and chunk of residues: the query-side (shifted) and key-side views of ``ts``."""
        sh = self.plan.shift
        views = [self._view(t) for t in ts]
        S, _, nb = views[0].shape[:3]
        for s in range(S):
            for r0, r1 in _chunks(self.l, nb * d):
                yield (
                    [t[s : s + 1, r0:r1, sh:] for t in views],
                    [t[s : s + 1, r0:r1, : nb - sh] for t in views],
                )

    def forward(self, q, k, v, o, lse, scale):
        for (qc, _, _, oc, lc), (_, kc, vc, _, _) in self._calls((q, k, v, o, lse), q.shape[-1]):
            op, lp = _FWD(qc, kc, vc, 0.0, True, scale=scale)
            _merge(oc, lc, op, lp)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):
        ts = (q, k, v, o, lse, do, dq, dk, dv)
        for (qc, _, _, oc, lc, doc, dqc, _, _), (_, kc, vc, _, _, _, _, dkc, dvc) in self._calls(ts, q.shape[-1]):
            _accumulate((dqc, dkc, dvc), _BWD(doc, qc, kc, vc, oc, lc, 0.0, True, scale=scale))


class _Earlier(_Run):
    """``earlier``: query block a against the gathered columns of blocks 0..a-1."""

    def _gather(self, k, v):
        """Gathered keys and values (S, nb*c', .), their positions in each sequence and in (S*n, .) (both
        (S, nb*c')) and c'."""
        S, n, _ = k.shape
        offs = torch.as_tensor(self.plan.offsets, device=k.device)  # (heads, c')
        nb, cc = n // self.l, offs.shape[1]
        idx = (torch.arange(nb, device=k.device)[:, None] * self.l + offs[:, None, :]).reshape(-1, nb * cc)
        idx = idx.repeat(S // len(idx), 1)  # sequence s is head s mod heads
        rows = idx + torch.arange(S, device=k.device)[:, None] * n
        # whole rows of (S*n, .): index_select copies each, where gather reads element by element
        take = lambda t: t.reshape(S * n, -1).index_select(0, rows.view(-1)).view(S, nb * cc, -1)  # noqa: E731
        return take(k), take(v), idx, rows, cc

    def _groups(self, q, idx, cc):
        """Query blocks [a0, a1) per call, with keys [0, (a1 - 1) c') and the additive mask of the
        ``earlier`` layout there (the staircase), None for a single block (all its keys count)."""
        S, n, d = q.shape
        l, nb = self.l, n // self.l
        g = max(1, min(ROWS_PER_CALL // l, CHUNK_ELEMENTS // (S * l * d)))
        for a0 in range(1, nb, g):
            a1 = min(nb, a0 + g)
            kend, mask = (a1 - 1) * cc, None
            if a1 - a0 > 1:  # the layout holds for every row of a block alike: read it at each block's start
                starts = torch.arange(a0, a1, device=q.device)[:, None] * l
                inside = P.LAYOUTS["earlier"](starts, idx[0, None, :kend], P.Geometry(l))  # (a1 - a0, kend)
                mask = torch.zeros(a1 - a0, l, kend, dtype=q.dtype, device=q.device)
                mask = mask.masked_fill_(~inside[:, None], NEG_INF).view(1, 1, -1, kend)
            yield slice(a0 * l, a1 * l), slice(0, kend), mask

    def forward(self, q, k, v, o, lse, scale):
        ks, vs, idx, _, cc = self._gather(k, v)
        for rows, keys, mask in self._groups(q, idx, cc):
            qc, kc, vc = q[:, None, rows], ks[:, None, keys], vs[:, None, keys]
            op, lp = _FWD(qc, kc, vc, 0.0, False, attn_mask=mask, scale=scale)
            _merge(o[:, None, rows], lse[:, None, rows], op, lp)

    def backward(self, do, q, k, v, o, lse, scale, dq, dk, dv):
        """Each call's key gradients go straight to their positions (``index_add_`` of rows of dk, dv
        viewed (S*n, .)): no gradient buffers of the gathered keys, which would put the backward's peak
        above dense attention's."""
        ks, vs, idx, rows_of, cc = self._gather(k, v)
        S, n, _ = k.shape
        flat = [t.view(S * n, t.shape[-1]) for t in (dk, dv)]
        for rows, keys, mask in self._groups(q, idx, cc):
            ts = (do[:, None, rows], q[:, None, rows], ks[:, None, keys], vs[:, None, keys], o[:, None, rows])
            gq, gk, gv = _BWD(*ts, lse[:, None, rows], 0.0, False, attn_mask=mask, scale=scale)
            dq[:, None, rows] += gq
            at = rows_of[:, keys].reshape(-1)
            for dst, g in zip(flat, (gk, gv)):
                dst.index_add_(0, at, g.reshape(-1, g.shape[-1]))


def runs_for(pattern: str, l: int, c: int | None, ranks, nb: int) -> list[_Run]:
    """The runs computing ``pattern`` for heads of the given summary ranks, read from the parts table: an
    ``own`` and a ``previous`` part together as windows where :func:`~repro.models.kernels.plan.window`
    plans them (fewer keys per query than two tiles), else every part in its own layout."""
    live = [
        (part, p) for part in P.parts(pattern) if (p := plan(part, pattern, l, c, tuple(ranks), nb)).kind != "empty"
    ]
    natural = tuple(part for part, p in live if p.layout in ("own", "previous"))
    win = window(natural, pattern, l, c, tuple(ranks), WINDOW_SPLIT) if len(natural) == 2 else None
    out: list[_Run] = [_Window(win, l)] if win else []
    for part, p in live:
        if win and p.layout in ("own", "previous"):
            continue
        if p.layout in ("own", "previous"):
            out.append(_Tiles(p, l))
        elif p.layout == "residue":
            out.append(_Residues(p, l))
        elif p.layout == "earlier":
            out.append(_Earlier(p, l))
        else:
            raise ValueError(f"the CPU kernel has no layout {p.layout!r} (part {part} of {pattern!r})")
    return out


def _labelled(run: _Run, way: str):
    """A profiler range named after the run's layout (``blocked.window.backward``): a profile of the
    kernel then says which part its time went to (``repro bench attention --profile``)."""
    return torch.profiler.record_function(f"blocked.{run.plan.layout}.{way}")


class PartsAttention(torch.autograd.Function):
    """The union of ``runs`` on q, k, v (S, n, .): the first run that covers every row creates the
    buffers, the others fold into them."""

    @staticmethod
    def forward(ctx, q, k, v, runs, scale):
        lead = next((r for r in runs if r.covers_all()), None)
        if lead is None:
            o, lse = q.new_zeros(*q.shape[:2], v.shape[-1]), q.new_full(q.shape[:2], NEG_INF)
        else:
            with _labelled(lead, "forward"):
                o, lse = lead.first(q, k, v, scale)
        for run in runs:
            if run is not lead:
                with _labelled(run, "forward"):
                    run.forward(q, k, v, o, lse, scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.runs, ctx.lead, ctx.scale = runs, lead, scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        lse = lse.masked_fill(lse.isneginf(), 0.0)  # rows without keys: every part's P is 0 there
        if ctx.lead is None:
            dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        else:
            with _labelled(ctx.lead, "backward"):
                dq, dk, dv = ctx.lead.first_backward(do, q, k, v, o, lse, ctx.scale)
        for run in ctx.runs:
            if run is not ctx.lead:
                with _labelled(run, "backward"):
                    run.backward(do, q, k, v, o, lse, ctx.scale, dq, dk, dv)
        return dq, dk, dv, None, None


def _sequences(t: torch.Tensor) -> torch.Tensor:
    """(B, H, n, d) as contiguous (B*H, n, d) (every layout is then a view): ``t`` itself where it is."""
    return t.reshape(-1, *t.shape[2:]).contiguous()


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
    (B, H, n, _), l = q.shape, stride
    pad = (-n) % l
    if pad:
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    dv = v.shape[-1]
    if q.shape[-1] != dv:  # the fused kernel wants one head size: zero columns change no score, no output
        w = max(q.shape[-1], dv)
        q, k, v = (torch.nn.functional.pad(t, (0, w - t.shape[-1])) for t in (q, k, v))
    ranks = list(range(H)) if ranks is None else list(ranks)
    runs = runs_for(pattern, l, c, ranks, (n + pad) // l)
    with torch.autocast("cpu", enabled=False):
        o = PartsAttention.apply(*(_sequences(t) for t in (q, k, v)), runs, scale)
    return o.view(B, H, n + pad, -1)[:, :, :n, :dv].to(dtype)
