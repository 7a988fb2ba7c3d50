"""Reading a checkpoint of the official adaptive-span code, checked key by key.

The official ``utils.save_checkpoint`` writes ``{iter_no, model, logger, optimizer, scheduler_iter}``;
``model`` is the state dict of its ``TransformerSeq`` inside ``DataParallel`` (or, with ``--distributed``,
``DistributedDataParallel``), so every key starts with ``module.``. A bare state dict, with or without the
prefix, is read too. The file is unpickled by torch's weights-only unpickler: tensors and plain data only;
one that needs code is refused, never executed.

The model's keys (``i`` a layer; d the width, H heads of d_h = d / H, S the span limit, V the symbols, F
the feed-forward width):

* ``in_emb.weight`` (V, d); ``out_emb.weight`` (V, d), ``out_emb.bias`` (V,);
* ``key_pe`` (1, d_h, S): the relative position embeddings, one set shared by every layer and head;
* ``layers.i.attn.proj_{query,key,val,out}.weight`` (d, d), no biases;
* ``layers.i.attn.attn.adaptive_span._mask.current_val`` (H, 1, 1): z / S per head, and ``mask_template``
  (S,): linspace(1 - S, 0, S), a constant of the soft mask (both absent without ``--adapt-span``);
* ``layers.i.norm{1,2}.{weight,bias}`` (d,); ``layers.i.ff.fc1.{weight (F, d), bias (F,)}``,
  ``layers.i.ff.fc2.{weight (d, F), bias (d,)}``.

The configuration is read off the shapes (width, heads, layers, S, F, V, whether the span is adaptive),
each bounded before anything is allocated from it, and every tensor's elements must be in the file (no
stride-0 tensor declaring a billion positions in a few hundred KB);
what the shapes do not hold (the ramp R, the block, dropout, lambda) comes from the flags it was trained
with (:mod:`repro.pretrained.released`, or the import's options). Persistent-memory (``--pers-mem-size``)
and adaptive-input (``--adapt-io``) models have no counterpart in the suite and are refused.
"""

from __future__ import annotations

import pickle
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from repro.data.fetch import digest_file
from repro.errors import UserError
from repro.files import safeyaml
from repro.store.checkpoints import unsafe_content

PREFIX = "module."  # DataParallel's and DistributedDataParallel's
MASK = "attn.attn.adaptive_span._mask"
EXPECTED = "expected an official adaptive-span checkpoint (.pt)"
# Bounds on what a checkpoint's keys and shapes declare, checked before anything is allocated or looped over
# from them (a hostile file declares layer 10^11 or S = 10^9): each far above the released models (at most
# 24 layers, width 768, feed-forward 4096, S = 8192, about 200 symbols); a dimension of 0 is refused too.
MAX_LAYERS = 1024  # layers (a key's layer index is below it)
MAX_WIDTH = 1 << 16  # d_model and the feed-forward width F
MAX_HEADS = 1024  # H = d_model / d_h
MAX_SPAN = 1 << 20  # S, the span limit (128 x the released 8192)
MAX_VOCAB = 1 << 16  # V (the official token streams are numbered in uint16: repro.pretrained.symbols)
LAYER = re.compile(r"layers\.(\d+)\.")
REFUSED = {  # a key part -> the official option that made it, which the suite's model does not have
    ".persistent_memory.": "a persistent-memory model (--pers-mem-size): the suite's adaptive-span model has none",
    "emb_layers.": "adaptive input embeddings (--adapt-io): the suite's model has one embedding table",
    "out_layers.": "an adaptive softmax (--adapt-io): the suite's model has one output layer",
}


class ImportRefused(UserError):
    """A file that is not an official adaptive-span checkpoint the suite can load (the message names it)."""


@dataclass(frozen=True)
class Shape:
    """The configuration a checkpoint's tensors fix."""

    layers: int
    d_model: int
    d_ff: int
    heads: int
    limit: int  # S
    vocab: int  # V, the official code's symbols
    adaptive: bool  # trained with --adapt-span (else every head sees the last S tokens)

    def describe(self) -> str:
        span = "adaptive" if self.adaptive else "fixed"
        return (
            f"{self.layers} layers, width {self.d_model}, {self.heads} heads, feed-forward {self.d_ff}, "
            f"{span} span S = {self.limit}, {self.vocab} symbols"
        )


@dataclass(frozen=True)
class OfficialCheckpoint:
    path: Path
    sha256: str
    tensors: dict[str, torch.Tensor]  # the model's, without the ``module.`` prefix
    shape: Shape
    iter_no: int | None  # the last completed iteration (of --nbatches steps), None in a bare state dict
    prefixed: bool  # the keys carried ``module.``


def read(path: Path) -> OfficialCheckpoint:
    """The checkpoint at ``path``, every key and shape checked (ImportRefused naming the first fault)."""
    path = Path(path)
    raw = _load(path)
    state, iter_no = _model_state(path, raw)
    tensors, prefixed = _unprefixed(path, state)
    for key in tensors:
        for part, why in REFUSED.items():
            if part in f".{key}":
                raise ImportRefused(f"{path}: model key {key!r}: {why}; refused")
    shape = _shape(path, tensors)
    _check_keys(path, tensors, expected_shapes(shape), shape)
    _check_storage(path, tensors)
    _check_values(path, tensors, shape)
    return OfficialCheckpoint(path, digest_file(path), tensors, shape, iter_no, prefixed)


def _load(path: Path):
    """The unpickled file, torch's warnings about it (a pickle protocol it does not expect) silenced: the
    refusal, if any, is the one line said."""
    _regular(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if "GLOBAL" not in str(err):  # not a pickle of objects: garbage to the unpickler
            raise ImportRefused(
                f"{path}: not a torch checkpoint (torch's weights-only unpickler cannot read it)"
            ) from None
        raise ImportRefused(
            f"{path}: refused to load: it holds {unsafe_content(err)}, not only tensors and plain data (the "
            "official checkpoints hold nothing else)"
        ) from None
    except Exception as err:  # truncated, not a torch file
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise ImportRefused(f"{path}: not a torch checkpoint ({reason})") from None


def _regular(path: Path) -> None:
    """``path`` is a regular file (links followed), or ImportRefused saying what is there instead."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ImportRefused(f"{path}: no such file; {EXPECTED}") from None
    except OSError as err:  # a loop of links (ELOOP), a path through a file (ENOTDIR), no permission
        raise ImportRefused(f"{path}: cannot read: {err.strerror}; {EXPECTED}") from None
    if stat.S_ISDIR(mode):
        raise ImportRefused(f"{path}: is a directory; {EXPECTED}")
    if not stat.S_ISREG(mode):
        raise ImportRefused(f"{path}: is not a regular file ({safeyaml.not_regular(mode)}); {EXPECTED}")


def _model_state(path: Path, raw) -> tuple[dict, int | None]:
    """The model's state dict and ``iter_no``, from a whole official checkpoint or a bare state dict."""
    if isinstance(raw, dict) and isinstance(raw.get("model"), dict):
        iter_no = raw.get("iter_no")
        return raw["model"], iter_no if isinstance(iter_no, int) and not isinstance(iter_no, bool) else None
    if isinstance(raw, dict) and raw and all(isinstance(v, torch.Tensor) for v in raw.values()):
        return raw, None
    found = ", ".join(sorted(map(str, raw))[:6]) if isinstance(raw, dict) else type(raw).__name__
    raise ImportRefused(
        f"{path}: not an official adaptive-span checkpoint: expected utils.save_checkpoint's dict (iter_no, "
        f"model, optimizer, logger) or a model state dict; found {found or 'an empty dict'}"
    )


def _unprefixed(path: Path, state: dict) -> tuple[dict[str, torch.Tensor], bool]:
    keys = [str(k) for k in state]
    prefixed = [k.startswith(PREFIX) for k in keys]
    if any(prefixed) and not all(prefixed):
        odd = keys[prefixed.index(False)]
        raise ImportRefused(f"{path}: model key {_key_text(odd)} lacks the {PREFIX!r} prefix the other keys have")
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise ImportRefused(f"{path}: model key {_key_text(key)}: expected a tensor, found {type(value).__name__}")
    cut = len(PREFIX) if all(prefixed) else 0
    return {str(k)[cut:]: v for k, v in state.items()}, all(prefixed)


def _needed(path: Path, tensors: dict[str, torch.Tensor], key: str, dims: int) -> torch.Tensor:
    if key not in tensors:
        raise ImportRefused(f"{path}: model key {key!r} is missing (every official adaptive-span model has it)")
    if tensors[key].dim() != dims:
        raise ImportRefused(f"{path}: model key {key!r} has shape {_shape_text(tensors[key])}; expected {dims} dims")
    return tensors[key]


def _shape(path: Path, tensors: dict[str, torch.Tensor]) -> Shape:
    """The configuration the tensors fix, each dimension bounded: width and V from the input embedding,
    d_h and S from the position embeddings, H = d / d_h, the layers from the keys, F from the first layer."""
    emb = _needed(path, tensors, "in_emb.weight", 2)
    vocab = _bounded(path, "in_emb.weight", emb, 0, "V (symbols)", MAX_VOCAB)
    d = _bounded(path, "in_emb.weight", emb, 1, "the width d", MAX_WIDTH)
    pe = _needed(path, tensors, "key_pe", 3)
    dh = _bounded(path, "key_pe", pe, 1, "d_h", d)
    limit = _bounded(path, "key_pe", pe, 2, "the span limit S", MAX_SPAN)
    if pe.shape[0] != 1 or d % dh:
        raise ImportRefused(
            f"{path}: model key 'key_pe' has shape {_shape_text(pe)}; expected (1, d_h, S) with d_h dividing the "
            f"width {d}"
        )
    if d // dh > MAX_HEADS:
        raise ImportRefused(
            f"{path}: model key 'key_pe' has shape {_shape_text(pe)}: d_h = {dh} makes {d // dh:,} heads of the "
            f"width {d}; allowed: at most {MAX_HEADS:,}"
        )
    found = set()
    for key in tensors:
        if m := LAYER.match(key):
            index = m.group(1)
            if len(index) > len(str(MAX_LAYERS)) or int(index) >= MAX_LAYERS:
                raise ImportRefused(
                    f"{path}: model key {_key_text(key)}: layer index {_key_text(index)}; allowed: 0 to "
                    f"{MAX_LAYERS - 1}"
                )
            found.add(int(index))
    if not found:
        raise ImportRefused(f"{path}: model key 'layers.0.attn.proj_query.weight' is missing (no layer found)")
    fc1 = _needed(path, tensors, "layers.0.ff.fc1.weight", 2)
    d_ff = _bounded(path, "layers.0.ff.fc1.weight", fc1, 0, "the feed-forward width F", MAX_WIDTH)
    adaptive = f"layers.0.{MASK}.current_val" in tensors
    return Shape(max(found) + 1, d, d_ff, d // dh, limit, vocab, adaptive)


def _bounded(path: Path, key: str, tensor: torch.Tensor, dim: int, name: str, limit: int) -> int:
    """Dimension ``dim`` of ``tensor`` (model key ``key``), which fixes ``name``: 1 to ``limit``."""
    value = tensor.shape[dim]
    if not 1 <= value <= limit:
        raise ImportRefused(
            f"{path}: model key {key!r} has shape {_shape_text(tensor)}: {name} = {value:,}; allowed: 1 to {limit:,}"
        )
    return value


def expected_shapes(shape: Shape) -> dict[str, tuple[int, ...]]:
    """Every key of the official model of ``shape``, in the official code's order, with its shape."""
    d, F, V, S, H = shape.d_model, shape.d_ff, shape.vocab, shape.limit, shape.heads
    out: dict[str, tuple[int, ...]] = {"key_pe": (1, d // H, S), "in_emb.weight": (V, d)}
    out.update({"out_emb.weight": (V, d), "out_emb.bias": (V,)})
    for i in range(shape.layers):
        at = f"layers.{i}."
        if shape.adaptive:
            out.update({f"{at}{MASK}.current_val": (H, 1, 1), f"{at}{MASK}.mask_template": (S,)})
        out.update({f"{at}attn.proj_{p}.weight": (d, d) for p in ("query", "out", "val", "key")})
        out.update({f"{at}norm1.weight": (d,), f"{at}norm1.bias": (d,)})
        out.update({f"{at}ff.fc1.weight": (F, d), f"{at}ff.fc1.bias": (F,)})
        out.update({f"{at}ff.fc2.weight": (d, F), f"{at}ff.fc2.bias": (d,)})
        out.update({f"{at}norm2.weight": (d,), f"{at}norm2.bias": (d,)})
    return out


def _check_keys(path: Path, tensors: dict, expected: dict[str, tuple[int, ...]], shape: Shape) -> None:
    model = f"the model its tensors describe ({shape.describe()})"
    for key in expected:
        if key not in tensors:
            raise ImportRefused(f"{path}: model key {key!r} is missing; {model} has it")
    for key in tensors:
        if key not in expected:
            raise ImportRefused(f"{path}: model key {_key_text(key)} is not a key of {model}")
    for key, want in expected.items():
        if tuple(tensors[key].shape) != want:
            raise ImportRefused(
                f"{path}: model key {key!r} has shape {_shape_text(tensors[key])}; {model} needs {want}"
            )


def _check_storage(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Every tensor's elements are in the file: a view repeating its data (stride 0) would be expanded to
    its declared size by the first computation on it."""
    for key, value in tensors.items():
        held = value.untyped_storage().nbytes()
        if value.numel() * value.element_size() > held:
            raise ImportRefused(
                f"{path}: model key {key!r} has shape {_shape_text(value)} with strides {value.stride()}: its "
                f"{value.numel():,} elements are not in the file (its data holds {held:,} bytes); expected a tensor "
                "of its own elements"
            )


def _check_values(path: Path, tensors: dict[str, torch.Tensor], shape: Shape) -> None:
    """Floating point and finite; z / S in [0, 1] (the official trainer clamps it after every step); the
    mask's constant template as the official code builds it (anything else is another model)."""
    for key, value in tensors.items():
        if not value.is_floating_point() or not bool(torch.isfinite(value).all()):
            raise ImportRefused(f"{path}: model key {key!r}: expected finite floating-point values")
    if not shape.adaptive:
        return
    template = torch.linspace(1 - shape.limit, 0, shape.limit)
    for i in range(shape.layers):
        z = tensors[f"layers.{i}.{MASK}.current_val"]
        if bool((z < 0).any() or (z > 1).any()):
            raise ImportRefused(
                f"{path}: model key 'layers.{i}.{MASK}.current_val': z / S = {z.flatten().tolist()}; allowed: "
                "0 to 1 (the official trainer clamps it)"
            )
        if not torch.equal(tensors[f"layers.{i}.{MASK}.mask_template"].float(), template):
            raise ImportRefused(
                f"{path}: model key 'layers.{i}.{MASK}.mask_template' is not linspace(1 - S, 0, S) with "
                f"S = {shape.limit}: not the official soft mask"
            )


def _shape_text(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def _key_text(key: str, keep: int = 80) -> str:
    """``key`` quoted, cut to its first ``keep`` characters (a file's key may be a megabyte long)."""
    return repr(key) if len(key) <= keep else f"{key[:keep]!r}... ({len(key):,} characters)"
