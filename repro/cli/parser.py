"""The argument parser: every command, its options and help, bound to the ``cmd_*`` function that runs it.

Commands that train, sample or talk to W&B import torch, Lightning and wandb where they start: every
``repro`` invocation (``--help``, ``list``, tab completion) would otherwise wait seconds for them.
"""

from __future__ import annotations

import argparse
import importlib

import shtab

from repro.claims.stats import CONFIDENCE
from repro.cli import options
from repro.cli.bench import BENCHES, cmd_bench
from repro.cli.manifests import cmd_list, cmd_show, cmd_validate
from repro.cli.pretrained import cmd_import
from repro.cli.report import cmd_renderers, cmd_report
from repro.cli.retrain import cmd_retrain
from repro.cli.run import cmd_run
from repro.cli.sample import cmd_sample
from repro.cli.status import cmd_status
from repro.cli.tracking import cmd_dashboard, cmd_pull, cmd_sync
from repro.cli.verify import cmd_verify, tolerance
from repro.config.manifest import DEFAULT_SCALE
from repro.data import cli as data_cli
from repro.pretrained.released import RELEASED
from repro.session.exits import RUN_INTERRUPTED
from repro.train import launch

DESCRIPTION = """Reproduce the tables and figures of Adaptive Attention Span (Sukhbaatar et al. 2019) and
Sparse Transformers (Child et al. 2019): train a manifest's runs into the store, then judge its claims.

first steps:  repro list                           every manifest, with its runs and how many are finished
              repro run smoke --results /tmp/first   train one small model into a fresh root (minutes)
              repro report smoke --results /tmp/first
              repro report as-table1               a table, its figures and claim verdicts from the shipped runs
              repro run as-table1 --results DIR    train its runs afresh (tiny scale by default; ETA first)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = options.Parser(prog="repro", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=None, help=RESULTS_HELP)
    parser.add_argument("--allow-read", action="append", default=None, metavar="DIR", help=ALLOW_READ_HELP)
    parser.add_argument("--trust-code", action="append", default=None, metavar="DIR", help=TRUST_CODE_HELP)
    shtab.add_argument_to(
        parser,
        ["--print-completion"],
        help='print a shell completion script (bash, zsh, tcsh): e.g. `eval "$(repro --print-completion bash)"`',
        preamble=COMPLETION,
    )
    # every subcommand takes --results too (after it: `repro run smoke --results DIR`)
    common = options.Parser(add_help=False)
    common.add_argument("--results", default=argparse.SUPPRESS, help=RESULTS_HELP)
    common.add_argument("--allow-read", action="append", default=argparse.SUPPRESS, metavar="DIR", help=ALLOW_READ_HELP)
    common.add_argument("--trust-code", action="append", default=argparse.SUPPRESS, metavar="DIR", help=TRUST_CODE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, func, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, parents=[common])
        p.set_defaults(func=func)
        return p

    def manifest_args(p: argparse.ArgumentParser, scale: bool = True, optional: str | None = None) -> None:
        """The manifest and its overrides; ``optional``: the name may be left out (the help says what is
        then meant), and the overrides name stored runs (those made with them)."""
        name = p.add_argument(
            "name",
            nargs="?" if optional else None,
            help=optional or "a manifest: its name, a group (every name ending with it: `table1`), or a path",
        )
        name.complete = {"bash": "_repro_manifests", "zsh": "_repro_manifests"}
        p.add_argument(
            "overrides",
            nargs="*",
            metavar="KEY=VALUE",
            help="the overrides the runs were made with"
            if optional
            else "set a dotted key in every run (model.span.ramp=64); with -m, KEY=V1,V2 sweeps it",
        )
        p.add_argument(
            "-m",
            "--multirun",
            action="store_true",
            help="the overrides include sweeps (KEY=V1,V2)"
            if optional
            else "make every KEY=V1,V2 override a grid axis (added, or replacing the manifest's)",
        )
        if scale:
            p.add_argument("--scale", default=DEFAULT_SCALE, help=SCALE_HELP)

    p = command("list", cmd_list, "every manifest: title, its finished and total runs at each trained scale")
    p.add_argument(
        "--scale",
        default=None,
        help="count the runs at this scale only (default: every scale with finished runs, and tiny)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (one object per manifest)")
    p.add_argument("--names", action="store_true", help="print only the names (for shell completion)")

    p = command("show", cmd_show, "the resolved runs of a manifest (or a group) as a table")
    manifest_args(p)
    seeds_arg(p, "show")
    p.add_argument("--json", action="store_true", help="print JSON, each run with its resolved spec")
    p.add_argument("--save", metavar="PATH", default=None, help=SAVE_HELP)

    p = command("validate", cmd_validate, "check manifests (all shipped ones when no path is given)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="manifest files (default: every discovered manifest)")
    p.add_argument(
        "--renderers", action="store_true", help="also load the manifests' own renderer files (runs their code)"
    )

    p = command("run", cmd_run, "train every run of a manifest or group (finished runs are skipped)")
    p.set_defaults(interrupted=RUN_INTERRUPTED)
    manifest_args(p)
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the runs whose grid cell has this value (repeatable; KEY may be a dotted suffix)",
    )
    p.add_argument(
        "--max-steps",
        type=options.positive("steps"),
        default=None,
        metavar="N",
        help="cap every run at N steps (a different run id: kept out of reports); a capped run scores each "
        "split's first train.val_tokens targets (the quick validation's), unless --full-eval",
    )
    p.add_argument(
        "--full-eval",
        action="store_true",
        help="with --max-steps: score every target of each split, as an uncapped run does",
    )
    p.add_argument(
        "--limit-bytes",
        type=options.positive("tokens"),
        default=None,
        metavar="N",
        help="runs of pretrained weights (scale pretrained): score only each split's first N tokens, a quick "
        "look (the override eval.prefix=N: a manifest of its own, reported apart)",
    )
    seeds_arg(p, "train")
    p.add_argument(
        "--dry-run", action="store_true", help="list the runs, their state and missing datasets; train nothing"
    )
    p.add_argument(
        "--devices",
        type=options.positive("devices"),
        default=1,
        metavar="G",
        help="processes (accelerators) per node (default 1)",
    )
    p.add_argument(
        "--num-nodes",
        "--nodes",
        dest="num_nodes",
        type=options.positive("nodes"),
        default=1,
        metavar="N",
        help="nodes per run (default 1): started by torchrun or srun, or allocated by --launcher slurm",
    )
    p.add_argument("--no-wandb", action="store_true", help="do not log to Weights & Biases")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print the libraries' lines (Lightning's device and stop lines, W&B's banners and summaries)",
    )
    p.add_argument("--save", metavar="PATH", default=None, help=SAVE_HELP)
    p.add_argument("--run-id", default=None, metavar="ID", help="only the run with this id (what a job runs)")
    p.add_argument(
        "--retrain-checkpoint",
        action="store_true",
        help="train finished runs that have no checkpoint (checkpoints are not committed) again, check that "
        "the retrained run reproduces the stored bits, and keep its checkpoint (for `repro sample`); one that "
        "does not stays under <results>/.retrain, which `repro sample` loads",
    )
    cluster = p.add_argument_group("launchers (submitit; `pip install -e '.[cluster]'`)")
    cluster.add_argument(
        "--launcher",
        choices=launch.LAUNCHERS,
        default=None,
        help="local: run the runs as --max-parallel local processes and wait; slurm: submit them "
        "as one job array and return with the job ids (default: one after another, here)",
    )
    cluster.add_argument(
        "--max-parallel",
        type=options.positive(),
        default=None,
        metavar="K",
        help="local: processes at a time (default 1); slurm: array tasks at a time",
    )
    cluster.add_argument("--partition", default=None, help="SLURM partition")
    cluster.add_argument(
        "--gpus-per-node", type=options.positive(), default=None, metavar="G", help="SLURM GPUs per node"
    )
    cluster.add_argument(
        "--cpus-per-task", type=options.positive(), default=None, metavar="C", help="SLURM CPUs per task"
    )
    cluster.add_argument(
        "--time", type=options.positive(), default=None, metavar="MIN", help="SLURM time limit in minutes"
    )
    cluster.add_argument("--mem", default=None, metavar="M", help="SLURM memory per node (e.g. 32G)")
    cluster.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option, without its dashes (repeatable: --slurm-arg qos=high)",
    )

    p = command("status", cmd_status, "stored runs and their state")
    manifest_args(p, scale=False, optional="a manifest or group (default: every stored run)")
    p.add_argument("--json", action="store_true", help="print JSON (one object per run)")
    p.add_argument(
        "--dirty",
        action="store_true",
        help="only the runs trained from uncommitted code (code_version +dirty), counted per manifest "
        "(`repro retrain` trains them again from committed code)",
    )

    p = command("report", cmd_report, "regenerate a manifest's tables/figures and judge its claims")
    manifest_args(p, scale=False, optional="a manifest or group (or --all)")
    p.add_argument("--all", action="store_true", help="every manifest, and results/REPORT.md over them")
    p.add_argument("--wandb", action="store_true", help="also log the report into the manifest's W&B group")
    p.add_argument(
        "--confidence",
        type=options.confidence,
        default=CONFIDENCE,
        help=f"the confidence level of the verdicts' t intervals (default {CONFIDENCE})",
    )

    command("renderers", cmd_renderers, "every renderer: what it draws, the summary and reference keys it reads")

    p = command(
        "verify",
        cmd_verify,
        "train stored runs again as they were made (their commit, threads, instruction set) and compare every "
        "stored number bit for bit (or within --tolerance), naming what of the environment differs",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id (or unique prefix) or run directory")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (the code and the re-executed runs)")
    p.add_argument(
        "--tolerance",
        type=tolerance,
        default=None,
        metavar="X",
        help="pass a run whose every number is within a relative X of the stored one (|stored - here| <= "
        "X |stored|; a stored 0 must be matched exactly), e.g. 1e-6; the line names the largest difference "
        "(default: bit for bit)",
    )

    p = command(
        "import",
        cmd_import,
        "import an official adaptive-span checkpoint into the suite's model and score it on the suite's data by "
        "the official protocol and the suite's own, stored as a run (`repro run as-table1 --scale pretrained` "
        "does it for the released models)",
    )
    p.add_argument("source", choices=["official"], help="whose checkpoint: the official adaptive-span code's")
    p.add_argument("file", metavar="FILE", help="the checkpoint (.pt) its main.py saved")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="set a dotted key of the run's spec (a file corpus: data.name=file data.path=P data.kind=text8)",
    )
    p.add_argument(
        "--like",
        choices=list(RELEASED),
        default="text8",
        help="the released script whose flags fill what the tensors do not say: dataset, block, ramp, dropout, "
        "lambda (default text8)",
    )
    p.add_argument("--manifest", default="official-import", help="the store folder the run goes under")
    p.add_argument(
        "--limit-bytes",
        type=options.positive("tokens"),
        default=None,
        metavar="N",
        help="score only each split's first N tokens (bytes, characters): a quick look, a run of its own",
    )

    p = command(
        "retrain",
        cmd_retrain,
        "train stored runs again from committed code (their spec as stored, in a worktree of the commit) and put "
        "them in place of the stored ones, saying their bits before and after",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id (or unique prefix) or run directory")
    p.add_argument(
        "--at",
        default=None,
        metavar="COMMIT",
        help="the commit to train at (default: this checkout's, which must hold no uncommitted change); e.g. "
        "the commit of the runs it is compared with",
    )

    p = command("sync", cmd_sync, "upload offline W&B runs not uploaded yet (needs W&B credentials)")
    p.add_argument("--entity", default=None, help="W&B entity (default: your login's)")
    p.add_argument("--project", default=None, help="W&B project (default: $REPRO_WANDB_PROJECT or repro)")

    p = command("pull", cmd_pull, "bring a manifest's runs from its W&B group into the store")
    p.add_argument("name", help="a manifest (name or path)")
    p.add_argument("--entity", default=None, help="W&B entity (default: your login's)")
    p.add_argument("--project", default=None, help="W&B project (default: $REPRO_WANDB_PROJECT or repro)")

    p = command("dashboard", cmd_dashboard, "compare stored runs in a local web page (trackio; no account)")
    p.add_argument("name", nargs="?", help="a manifest: import only its runs and open on them")
    p.add_argument("--scale", default=DEFAULT_SCALE, help="the scale to open on (one project per scale)")
    p.add_argument("--port", type=int, default=None, help="default: the first free port from 7860")
    p.add_argument("--host", default=None, help="default 127.0.0.1 (0.0.0.0 to serve the network)")

    p = command("sample", cmd_sample, "generate from a stored run (text, image grid or audio)")
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

    p = command("bench", None, "benchmarks: " + ", ".join(BENCHES))
    bench = p.add_subparsers(dest="bench", metavar="BENCH")
    for name, module in BENCHES.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        q = bench.add_parser(
            name, parents=[common], help=(mod.__doc__ or "").strip().splitlines()[0] if mod.__doc__ else None
        )
        q.add_argument("--json", action="store_true", help="print the records as JSON")
        q.add_argument(
            "--out",
            metavar="PATH",
            default=None,
            help=f"write the records here (default: <results>/bench/{name}.json, or, when that file exists, "
            f"a new {name}.<UTC time>.json beside it)",
        )
        q.add_argument("--replace", action="store_true", help="replace an existing record file (the committed one)")
        mod.add_arguments(q)
        q.set_defaults(func=cmd_bench, bench_module=mod)

    data_cli.register(sub, parents=[common])
    return parser


def seeds_arg(p: argparse.ArgumentParser, verb: str) -> None:
    """``--seeds N``: as many replicates of every grid cell as ``repro run --seeds N`` trains."""
    p.add_argument(
        "--seeds",
        type=options.positive("seeds per grid cell"),
        default=None,
        metavar="N",
        help=f"{verb} N seeds of every grid cell (replicates: train.seed + 0 .. N-1; default: the manifest's)",
    )


RESULTS_HELP = "results root (default: $REPRO_RESULTS or results/)"
TRUST_CODE_HELP = (
    "a folder whose renderer files (.py, code) a manifest's `analysis:` may name, besides the manifest's own "
    "folder and the project's analysis/ (repeatable; also $REPRO_TRUST_CODE)"
)
ALLOW_READ_HELP = (
    "a folder whose files a manifest's `file` corpus may be, besides the manifest's own folder "
    "(repeatable; also $REPRO_ALLOW_READ)"
)
SCALE_HELP = (
    "tiny (the default: 2 CPU cores, minutes per run), cpu (2 CPU cores, up to 30 min), small (one "
    "GPU), paper (the paper's configuration), or another scale the manifest defines"
)
SAVE_HELP = "write the manifest with its overrides to PATH (it includes the original; `repro validate PATH`)"
# bash/zsh: complete manifest names from `repro list --names`
COMPLETION = {
    "bash": '_repro_manifests() { compgen -W "$(repro list --names 2>/dev/null)" -- "$1"; }',
    "zsh": "_repro_manifests() { compadd $(repro list --names 2>/dev/null) }",
}
