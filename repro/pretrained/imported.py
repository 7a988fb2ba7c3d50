"""A run of pretrained weights (``train.weights``): the official checkpoint put into the suite's model and
scored on the suite's data by the official protocol and by the suite's own, stored as a finished run.

In order: the checkpoint (a released one downloaded and checked against its recorded hash, or the file
given, checked against ``train.weights.sha256``) is read and checked key by key; the manifest's model
section must be the one its tensors describe; the official vocabulary is computed from the train split and
mapped onto the suite's; the mapped model must predict the first block of the valid split better than the
train split's unigram statistics (a wrong file, dataset or symbol order does not); then every split of
``eval.splits`` is scored twice, the official protocol's bits becoming ``<split>_bits`` (what the paper and
the official README report) and the suite's ``<split>_bits_suite``. ``eval.prefix`` scores only the first
tokens of each split, recorded in the summary and the run's spec (a run of its own, a quick look).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repro import cpu_isa
from repro.config.manifest import Manifest
from repro.config.spec import RunSpec
from repro.errors import UserError
from repro.pretrained import checkpoint, mapping, protocol, released, symbols
from repro.progress import duration
from repro.store.provenance import code_version
from repro.store.runs import FAILED, FINISHED, INTERRUPTED, RunDir, refresh_index
from repro.store.settle import settle
from repro.train import environment, fit, runner, signals
from repro.train.evaluation import evaluate, unigram_bits
from repro.train.rundata import RunData, open_data

SHAPE_KEYS = ("layers", "d_model", "d_ff", "heads")  # the model keys an official checkpoint's tensors fix
OFFICIAL_KEYS = {"window": "past", "mask_norm": "official", "init": "official"}


def weights_file(spec: RunSpec, echo: Callable[[str], None], path: Path | None) -> Path:
    """The checkpoint a run evaluates: the released one it names (downloaded, checked), or ``path``."""
    weights = spec.train.weights
    if weights.name is not None:
        return released.fetch(weights.name, echo)
    if path is None:
        raise UserError(
            f"run {spec.run_id}: train.weights.sha256 names an imported file; `repro import official FILE` "
            "evaluates one"
        )
    return path


def check_model(spec: RunSpec, ckpt: checkpoint.OfficialCheckpoint) -> None:
    """The spec's model section against the checkpoint's shapes and the official variant's keys."""
    found = mapping.model_section(ckpt, ramp=1, dropout=0.0, loss_coef=0.0, init=0.0)
    model = spec.model
    pairs = [(f"model.{k}", getattr(model, k), found[k]) for k in SHAPE_KEYS]
    pairs += [(f"model.{k}", getattr(model, k), v) for k, v in OFFICIAL_KEYS.items()]
    pairs += [(f"model.span.{k}", getattr(model.span, k), found["span"][k]) for k in ("kind", "limit")]
    for key, ours, theirs in pairs:
        if ours != theirs:
            raise UserError(f"{key}: {ours!r}, but {ckpt.path.name} needs {theirs!r} ({ckpt.shape.describe()})")


def split_streams(spec: RunSpec, data: RunData, syms: symbols.Symbols) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each evaluated split as (the suite's ids, the official stream), cut to ``eval.prefix`` tokens."""
    cut = spec.eval.prefix
    out = {}
    for split in spec.eval.splits:
        ids = np.asarray(data.splits[split])
        out[split] = (ids[:cut], syms.stream(ids)[:cut])
    return out


def unigram_level(train: np.ndarray, targets: np.ndarray, size: int) -> float:
    """Bits of ``targets`` under the train stream's unigram distribution (add-one smoothed)."""
    counts = np.bincount(train, minlength=size)[:size] + 1.0
    return float(-np.log2(counts / counts.sum())[targets].mean())


def check_fit(model, stream: np.ndarray, train_stream: np.ndarray, block: int, device, where: str) -> dict:
    """The first block of the official protocol on ``stream`` must beat the unigram level of its targets
    (a wrong vocabulary order or dataset lands far above it); its bits, that level and its seconds."""
    head = protocol.batchify(stream, protocol.BATCH)[:, : block + 1]
    started = time.perf_counter()
    bits = protocol.official_bits(model, head.reshape(-1).numpy(), block, device=device)["bits"]
    seconds = time.perf_counter() - started
    level = unigram_level(train_stream, head[:, 1:].reshape(-1).numpy(), model.vocab_size)
    if not bits < level:
        raise UserError(
            f"{where}: the mapped weights score {bits:.3f} bits on the first block of the valid split, no better "
            f"than its unigram level ({level:.3f}): not weights of this dataset, or its symbols in another order"
        )
    return {"bits": bits, "unigram_bits": level, "seconds": seconds}


@dataclass
class Prepared:
    """A pretrained run ready to score: its data, the checkpoint in the suite's model, checked to fit."""

    data: RunData
    ckpt: checkpoint.OfficialCheckpoint
    syms: symbols.Symbols
    order: np.ndarray  # the model id of each official id
    model: torch.nn.Module
    streams: dict[str, tuple[np.ndarray, np.ndarray]]  # split_streams
    fit: dict
    device: torch.device


def prepare(spec: RunSpec, data: RunData, path: Path, echo: Callable[[str], None]) -> Prepared:
    """Everything checked before anything of the run is written: the file, its keys and shapes against the
    spec, the vocabulary, the mapped model's fit on the first block (UserError naming the first fault)."""
    ckpt = checkpoint.read(path)
    weights = spec.train.weights
    if weights.sha256 is not None and ckpt.sha256 != weights.sha256:
        raise UserError(f"{path}: sha256 {ckpt.sha256}, but train.weights.sha256 is {weights.sha256}")
    check_model(spec, ckpt)
    syms = symbols.symbols(data.vocab, spec.data.label)
    train = syms.stream(data.train)
    order = symbols.official_order(syms, train, ckpt.shape.vocab, str(path))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    section = {"family": spec.family, **spec.resolved()["model"]}
    model = mapping.build(ckpt, section, order, syms.size, spec.data.block).to(device)
    fit = check_fit(model, syms.stream(data.splits["valid"]), train, spec.data.block, device, str(path))
    streams = split_streams(spec, data, syms)
    echo(f"  {path.name}: {ckpt.shape.describe()}; " + _eta(spec, streams, fit["seconds"]))
    return Prepared(data, ckpt, syms, order, model, streams, fit, device)


def scores(spec: RunSpec, got: Prepared, echo: Callable[[str], None]) -> dict[str, Any]:
    """The summary numbers of a prepared run: both protocols on every split, the model's statistics, what
    was imported."""
    started = time.perf_counter()
    out: dict[str, Any] = {}
    name = spec.train.weights.name
    for split, (ids, stream) in got.streams.items():
        official = protocol.official_bits(got.model, stream, spec.data.block, device=got.device)
        ours = evaluate(got.model, ids, spec, got.device, got.syms.size, progress=split)
        published = f"; the paper and the official README: {released.published(name, split):.2f}" if name else ""
        echo(f"  {split}: {official['bits']:.4f} bits (official protocol), {ours['bits']:.4f} (the suite's){published}")
        out.update({f"{split}_bits": official["bits"], f"{split}_targets": official["targets"]})
        out.update({f"{split}_bits_suite": ours["bits"], f"{split}_targets_suite": ours["targets"]})
    return {
        **out,
        **got.model.stats(),
        "eval_procedure": "official",  # repro.pretrained.protocol; the suite's protocol: *_bits_suite
        "eval_procedure_suite": "stream",
        "eval_prefix": spec.eval.prefix,
        "eval_seconds": round(time.perf_counter() - started, 2),
        "unigram_bits": unigram_bits(got.data.train, got.data.splits["valid"], got.syms.size),
        "fit_check": got.fit,
        "weights_source": spec.train.weights.source,
        "weights_file": got.ckpt.path.name,
        "weights_sha256": got.ckpt.sha256,
        "weights_iter_no": got.ckpt.iter_no,
        "weights_prefixed": got.ckpt.prefixed,
        "official_vocabulary": [got.syms.names[i] for i in got.order],
        "extra_symbols": list(got.syms.extra),
    }


def _eta(spec: RunSpec, streams: dict, seconds_per_block: float) -> str:
    """The evaluation's ETA from the first block's time: the official protocol's blocks and the suite's
    (as many tokens again, in ``eval.batch_size`` streams)."""
    block, batch = spec.data.block, protocol.BATCH
    blocks = sum(len(protocol.block_starts(len(s) // batch, block)) for _, s in streams.values())
    suite = sum(
        math.ceil(len(ids) / (spec.eval.batch_size * block)) * spec.eval.batch_size / batch
        for ids, _ in streams.values()
    )
    return f"evaluation ETA {duration((blocks + suite) * seconds_per_block)} (first block: {seconds_per_block:.2f} s)"


def score(spec: RunSpec, manifest: Manifest, root: Path, echo: Callable[[str], None], weights: Path | None = None):
    """What ``repro run`` does with a spec of pretrained weights (and ``repro import`` with its file,
    ``weights``): the run settled in the store as a trained run is (its data, the file and the mapped model
    checked before anything is written), then scored, not trained; its :class:`runner.Outcome`."""
    run = RunDir(root, spec.manifest, spec.run_id)
    state = run.state()
    stored = runner.recorded_environment(state)
    isa = None if state.finished else cpu_isa.for_run(stored)
    with environment.pinned(spec, isa, environment.recorded_precision(stored)) as precision:

        def ready() -> Prepared:
            return prepare(spec, open_data(spec, manifest), weights_file(spec, echo, weights), echo)

        with settle(run, spec.record(None), ready, echo, state) as got:
            if not got.trains:
                return runner.Outcome(spec, got.action, got.summary)
            return runner.Outcome(spec, *scored(spec, run, got.prepared, echo, precision))


def scored(spec: RunSpec, run: RunDir, got: Prepared, echo: Callable[[str], None], precision: str) -> tuple[str, dict]:
    """Score the settled run ``run`` of ``spec`` (its lock held) and store it: (status, summary). A failure
    while scoring marks it failed with the reason, a signal interrupted (at once: there is no step to
    finish); the next `repro run` or `repro import` scores it again."""
    run.write_spec(spec.record(code_version()))
    run.write_summary({**fit.opening(spec, got.data, precision), "steps": 0})
    try:
        final = scores(spec, got, echo)
    except signals.Interrupted as err:  # SIGTERM, SIGINT, SIGHUP: nothing to checkpoint, scored again later
        run.update_summary(status=INTERRUPTED)
        err.detail = f"run {spec.run_id} of {spec.manifest} marked interrupted; `repro run` scores it again"
        raise
    except Exception as err:
        run.update_summary(
            status=FAILED, error=str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        )
        raise
    summary = run.update_summary(status=FINISHED, **final)
    refresh_index(run.path.parent.parent.parent, spec.manifest)
    return FINISHED, summary
