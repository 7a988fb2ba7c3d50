"""``repro bench st-step``: seconds per Sparse Transformer training step per pattern, beside the dense
model at the same n and widths (the paper's Table 2 claim that sparse attention trains faster).

Every case is one training step as the recipe runs it (forward over a block of random tokens, cross
entropy, backward, global-norm clipping at 1.0, AdamW), batch ``--batch``; ``--precision bf16`` runs
under autocast (the paper trained in half precision; CUDA). The models of all patterns are built in one
process and stepped interleaved (:mod:`repro.bench.common`): ``speedup_vs_dense`` is the median over
rounds of the dense step's time / the pattern's within a round. Peak memory of a step: CUDA,
``max_memory_allocated`` above the model and optimizer; CPU, a fresh process per pattern (``common``)
that takes one step first.
"""

from __future__ import annotations

import argparse

from repro.bench import common


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=8192, help="tokens per training sequence (the block)")
    common.add_pattern_arguments(parser, ["merged", "interleaved", "multihead"], repeats=3)
    parser.add_argument("--layers", type=int, default=4, help="residual blocks")
    parser.add_argument("--d-model", type=int, default=256, help="model width")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument(
        "--impl",
        default="auto",
        choices=["auto", "blocked", "flex", "masked"],
        help="attention kernel (auto: flex on CUDA, blocked on CPU)",
    )
    parser.add_argument("--batch", type=int, default=1, help="sequences per step")
    parser.add_argument("--vocab", type=int, default=256, help="vocabulary size (random tokens)")
    parser.add_argument(
        "--precision",
        default="32",
        choices=["32", "bf16"],
        help="32, or bf16 under autocast (as the paper trained, on GPU)",
    )
    parser.add_argument("--checkpointing", action="store_true", help="recompute each residual block in backward")


def _setup(s: dict, pattern: str, n: int | None = None):
    """(model, one-step function) of ``pattern``."""
    import torch
    import torch.nn.functional as F

    from repro.models.sparse_transformer import Config, Model

    if s["threads"]:
        torch.set_num_threads(s["threads"])
    dev = torch.device(s["device"])
    n = n or s["n"]
    torch.manual_seed(0)
    cfg = Config(
        layers=s["layers"],
        d_model=s["d_model"],
        heads=s["heads"],
        pattern=pattern,
        stride=s["stride"],
        c=s["c"],
        combine=s["combine"],
        impl=s["impl"],
        checkpointing=s["checkpointing"],
    )
    model = Model(cfg, s["vocab"], n).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    x, y = (torch.randint(0, s["vocab"], (s["batch"], n), generator=g).to(dev) for _ in range(2))
    half = s["precision"] == "bf16"

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=half):
            logits = model(x).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return model, step


def _worker(payload: dict):
    import torch

    from repro.train import memory

    s = payload["setup"]
    dev = torch.device(s["device"])
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    if payload["what"] == "time":
        steps, info = {}, {}
        for p in payload["patterns"]:
            model, steps[p] = _setup(s, p)
            info[p] = {
                "flops_per_token": model.flops_per_token(),
                "attn_keys_per_query": model.keys_per_query(),
                "params": sum(t.numel() for t in model.parameters()),
            }
        errors: dict[str, str] = {}
        times = common.interleaved(steps, s["repeats"], sync, errors)
        return {
            "times": times,
            "errors": errors,
            "info": info,
            "threads": torch.get_num_threads(),
            "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        }
    pattern = payload["patterns"][0]
    if dev.type == "cuda":
        _, step = _setup(s, pattern)
        step()
        sync()
    else:
        _setup(s, pattern, 4 * s["stride"])[1]()  # libraries loaded, threads started, outside the measurement
        _, step = _setup(s, pattern)
    with memory.measuring(dev) as peak:
        step()
        sync()
    return {"peak_memory_bytes": int(peak.bytes)}


def _run(payload: dict, env: dict | None = None):
    if payload["setup"]["device"].startswith("cuda"):
        return _worker(payload)
    return common.run_worker("repro.bench.st_step", payload, env)


def main(args: argparse.Namespace) -> list[dict]:
    s = dict(
        n=args.n,
        layers=args.layers,
        d_model=args.d_model,
        heads=args.heads,
        stride=args.stride,
        c=args.c,
        combine=args.combine,
        impl=args.impl,
        batch=args.batch,
        vocab=args.vocab,
        precision=args.precision,
        checkpointing=args.checkpointing,
        repeats=args.repeats,
        threads=args.threads,
        device=args.device,
    )
    patterns = ["dense"] + [p for p in args.patterns if p != "dense"]
    timed = _run({"what": "time", "setup": s, "patterns": patterns})
    times, errors = timed.get("times", {}), timed.get("errors", {})
    base = times.get("dense")
    records = []
    for p in patterns:
        rec = {
            "pattern": p,
            **s,
            "threads": timed.get("threads"),
            "device_name": timed.get("device_name"),
            "kernels": timed.get("kernels"),
            "timing": "interleaved",
        }
        if p not in times:
            records.append({**rec, "error": errors.get(p) or timed.get("error", "timing worker failed")})
            continue
        mem = _run(
            {"what": "memory", "setup": s, "patterns": [p]},
            None if args.device.startswith("cuda") else common.memory_env(),
        )
        rec.update(
            seconds_per_step=common.median(times[p]),
            rounds=len(times[p]),
            speedup_vs_dense=common.paired_speedup(base, times[p]) if base else None,
            peak_memory_bytes=mem.get("peak_memory_bytes"),
            **timed["info"][p],
        )
        records.append(rec)
    dense = records[0]
    for rec in records:
        if dense.get("peak_memory_bytes") and rec.get("peak_memory_bytes") is not None:
            rec["memory_vs_dense"] = rec["peak_memory_bytes"] / dense["peak_memory_bytes"]
        if dense.get("flops_per_token") and rec.get("flops_per_token"):
            rec["flops_ratio_vs_dense"] = dense["flops_per_token"] / rec["flops_per_token"]
    common.append_jsonl(args.jsonl, records)
    return records


if __name__ == "__main__":  # a worker's fresh process (``_run``); run the bench with `repro bench st-step`
    common.worker_main(_worker)
