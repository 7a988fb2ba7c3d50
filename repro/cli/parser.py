"""The argument parser: the options every command takes, then each command of
:data:`repro.cli.commands.COMMANDS` with its own options (declared in its module), bound to its handler.

Commands that train, sample or talk to W&B import torch, Lightning and wandb where they start: every
``repro`` invocation (``--help``, ``list``, tab completion) would otherwise wait seconds for them.
"""

from __future__ import annotations

import argparse

import shtab

from repro.cli import options
from repro.cli.commands import COMMANDS

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
    for command in COMMANDS.values():
        description = command.help if command.description is None else command.description
        p = sub.add_parser(command.name, help=command.help, description=description, parents=[common])
        p.set_defaults(func=command.handler)
        command.add_arguments(p, [common])
    return parser


RESULTS_HELP = "results root (default: $REPRO_RESULTS or results/)"
TRUST_CODE_HELP = (
    "a folder whose renderer files (.py, code) a manifest's `analysis:` may name, besides the manifest's own "
    "folder and the project's analysis/ (repeatable; also $REPRO_TRUST_CODE)"
)
ALLOW_READ_HELP = (
    "a folder whose files a manifest's `file` corpus may be, besides the manifest's own folder "
    "(repeatable; also $REPRO_ALLOW_READ)"
)
# bash/zsh: complete manifest names from `repro list --names`
COMPLETION = {
    "bash": '_repro_manifests() { compgen -W "$(repro list --names 2>/dev/null)" -- "$1"; }',
    "zsh": "_repro_manifests() { compadd $(repro list --names 2>/dev/null) }",
}
