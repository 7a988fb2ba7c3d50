"""Option values checked as argparse reads them (``type=`` functions), and the parser that refuses a bad
one in one line, as every bad input is: ``error: --seeds 0: allowed: a positive number of seeds per grid
cell``, exit status 2 (the option's name, the value given, what is allowed); and the arguments several
commands take alike (a manifest with its overrides, ``--seeds``, ``--save``)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from repro.config.manifest import DEFAULT_SCALE
from repro.errors import UserError

MAX_SAMPLES = 1024  # repro sample --n
MAX_SAMPLE_LENGTH = 1_000_000  # repro sample --length: a minute of 16 kHz audio; hours at a CPU's ~140 symbols/s
MAX_SAMPLE_SYMBOLS = 1 << 24  # --n x --length (128 MiB of symbols): 1024 samples of a 16k block
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed takes up to this


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose ``type=`` refusals (ArgumentTypeError: the value and what is allowed) are
    a UserError naming the option; other usage errors as argparse words them."""

    def error(self, message: str):
        err = sys.exc_info()[1]  # argparse calls this while it handles the ArgumentError it raised
        if isinstance(err, argparse.ArgumentError) and isinstance(err.__context__, argparse.ArgumentTypeError):
            raise UserError(f"{err.argument_name.split('/')[0]} {err.__context__}") from None
        super().error(message)


def positive(what: str = "") -> Callable[[str], int]:
    """An integer >= 1 (``what``: of what, in the refusal)."""

    def parse(text: str) -> int:
        value = _number(int, text, "an integer")
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text}: allowed: a positive number{' of ' + what if what else ''}")
        return value

    return parse


def samples(text: str) -> int:
    """``repro sample --n``: 1 to MAX_SAMPLES."""
    value = _number(int, text, "an integer")
    if not 1 <= value <= MAX_SAMPLES:
        raise argparse.ArgumentTypeError(f"{text}: allowed: 1 to {MAX_SAMPLES} samples")
    return value


def sample_length(text: str) -> int:
    """``repro sample --length``: 1 to MAX_SAMPLE_LENGTH symbols."""
    value = _number(int, text, "an integer")
    if not 1 <= value <= MAX_SAMPLE_LENGTH:
        raise argparse.ArgumentTypeError(f"{text}: allowed: 1 to {MAX_SAMPLE_LENGTH:,} symbols")
    return value


def seed(text: str) -> int:
    """A random seed: 0 to MAX_SEED."""
    value = _number(int, text, "an integer")
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text}: allowed: 0 to 2**64 - 1")
    return value


def temperature(text: str) -> float:
    """``repro sample --temperature``: a finite number > 0."""
    value = _number(float, text, "a number")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text}: allowed: a finite number > 0")
    return value


def confidence(text: str) -> float:
    """``--confidence``: a level strictly between 0.5 and 1 (0.95, not 95)."""
    value = _number(float, text, "a number")
    if not 0.5 < value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a confidence level between 0.5 and 1, e.g. 0.95")
    return value


def _number(kind: type, text: str, expected: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: expected {expected}") from None


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


def seeds_arg(p: argparse.ArgumentParser, verb: str) -> None:
    """``--seeds N``: as many replicates of every grid cell as ``repro run --seeds N`` trains."""
    p.add_argument(
        "--seeds",
        type=positive("seeds per grid cell"),
        default=None,
        metavar="N",
        help=f"{verb} N seeds of every grid cell (replicates: train.seed + 0 .. N-1; default: the manifest's)",
    )


def only_arg(p: argparse.ArgumentParser, runs: str = "the runs") -> None:
    """``--only KEY=VALUE``: a selection's runs narrowed to a grid cell value (repeatable)."""
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"only {runs} whose grid cell has this value (repeatable; KEY may be a dotted suffix)",
    )


SCALE_HELP = (
    "tiny (the default: 2 CPU cores, minutes per run), cpu (2 CPU cores, up to 30 min), small (one "
    "GPU), paper (the paper's configuration), or another scale the manifest defines"
)
SAVE_HELP = "write the manifest with its overrides to PATH (it includes the original; `repro validate PATH`)"
