"""``repro sample``: generate from a stored run's checkpoint."""

from __future__ import annotations

from repro.cli.common import store_root


def cmd_sample(args) -> int:
    import torch  # torch, Lightning, matplotlib

    from repro.train import runner, sampling

    run = runner.find_run(store_root(args), args.run)
    model, spec, vocab, info = runner.load_trained(run)
    prompt = vocab.encode(args.prompt) if args.prompt else None
    room = spec.data.block - (len(prompt) if prompt is not None else 1) + 1
    length = min(args.length or room, room)
    generator = torch.Generator().manual_seed(args.seed)
    samples = sampling.sample(
        model, vocab.size, args.n, length, temperature=args.temperature, prompt=prompt, generator=generator
    )
    for path in sampling.write_samples(
        samples, vocab, info, run.path / "samples", f"seed{args.seed}-temp{args.temperature:g}"
    ):
        print(f"wrote {path}")
    if info.kind == "text":
        print(vocab.decode(samples[0].numpy()))
    return 0
