"""``repro sample``: generate from a stored run's checkpoint."""

from __future__ import annotations

import hashlib

from repro.cli import options
from repro.cli.common import store_root
from repro.cli.options import MAX_SAMPLE_SYMBOLS
from repro.errors import UserError
from repro.registry import Command
from repro.store.runs import find_run


def cmd_sample(args) -> int:
    import torch  # torch, Lightning, matplotlib

    from repro.sample import sampling
    from repro.sample.trained import load_trained

    run = find_run(store_root(args), args.run)
    model, spec, vocab, info = load_trained(run)
    prompt = vocab.encode(args.prompt) if args.prompt else None
    if prompt is not None and len(prompt) > spec.data.block:
        raise UserError(f"--prompt: {len(prompt)} symbols; allowed: at most the block, {spec.data.block}")
    room = spec.data.block - (len(prompt) if prompt is not None else 1) + 1
    length = args.length or room
    if args.n * length > MAX_SAMPLE_SYMBOLS:
        raise UserError(
            f"--n {args.n} x --length {length}: {args.n * length:,} symbols; allowed: at most {MAX_SAMPLE_SYMBOLS:,} "
            "in all"
        )
    if info.kind == "image" and length > room:  # one image is one block: there is nothing after it
        print(f"--length {length}: an image has {room} symbols after its start; drawing {room}")
        length = room
    generator = torch.Generator().manual_seed(args.seed)
    samples = sampling.sample_long(
        model, vocab.size, args.n, length, temperature=args.temperature, prompt=prompt, generator=generator
    )
    if prompt is not None:  # the prompt is part of what is shown and written
        samples = torch.cat([torch.as_tensor(prompt, dtype=torch.long)[None].expand(args.n, -1), samples], dim=1)
    stem = _stem(args.seed, args.n, length, args.prompt, args.temperature)
    for path in sampling.write_samples(samples, vocab, info, run.path / "samples", stem):
        print(f"wrote {path}")
    if info.kind == "text":
        for i, row in enumerate(samples.numpy()):
            print(
                f"--- sample {i + 1} of {args.n} ({length} symbols after the prompt) ---"
                if prompt is not None
                else f"--- sample {i + 1} of {args.n} ({length} symbols) ---"
            )
            print(vocab.decode(row))
    return 0


def _stem(seed: int, n: int, length: int, prompt: str | None, temperature: float) -> str:
    """The samples' file name: everything that decides them (the seed, how many, how long, the prompt by the
    start of its sha256, the temperature last, where Figure 5's renderer reads it), so that a draw with
    other arguments never overwrites another's: ``seed0-n4-len127-temp1``, ``seed0-n3-len70-prompt1a2b3c4d-temp1``."""
    told = f"-prompt{hashlib.sha256(prompt.encode()).hexdigest()[:8]}" if prompt else ""
    return f"seed{seed}-n{n}-len{length}{told}-temp{temperature:g}"


def add_arguments(p, parents) -> None:
    p.add_argument("run", help="run id (or unique prefix) or run directory")
    p.add_argument("--n", type=options.samples, default=4, help="number of samples")
    p.add_argument(
        "--length",
        type=options.sample_length,
        default=None,
        help=f"symbols per sample, at most {options.MAX_SAMPLE_LENGTH:,} (default: the block)",
    )
    p.add_argument("--temperature", type=options.temperature, default=1.0, help="softmax temperature (default 1.0)")
    p.add_argument("--prompt", default=None, help="text to continue (text runs)")
    p.add_argument("--seed", type=options.seed, default=0, help="random seed of the sampler (0 to 2**64 - 1)")


COMMAND = Command("sample", "generate from a stored run (text, image grid or audio)", add_arguments, cmd_sample)
