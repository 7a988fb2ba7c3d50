"""Other libraries' chatter, silenced where it comes from, so that a run's log holds the suite's own lines.

Always: Lightning's tip to install litlogger (an INFO record of its rank-zero logger), the FutureWarning
of torch's ``LeafSpec`` that Lightning's pytree helper instantiates, and W&B's warning that the
``anonymous`` setting has no effect (Lightning's WandbLogger passes it; see
:class:`repro.track.loggers.SpanViewLogger`).

At the default verbosity (``repro run`` without ``-v``) also Lightning's INFO lines (``GPU available``,
``TPU available``, ``Trainer.fit` stopped``, ``Restoring states from the checkpoint``; its warnings
stay) and W&B's terminal output (its banners, and the history and summary it prints when a run ends or
is interrupted): ``WANDB_SILENT``, unless the environment sets it. ``-v`` keeps them all.
"""

from __future__ import annotations

import logging
import os
import warnings

LITLOGGER_TIP = "💡 Tip: For seamless cloud logging"
LIGHTNING_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
LIGHTNING = ("lightning.pytorch", "lightning.fabric")
VERBOSE = "REPRO_VERBOSE"  # "1": the libraries' lines too (set by `repro run -v`; its jobs inherit it)
WANDB_SILENT = "WANDB_SILENT"
_SET_BY_US = "_REPRO_SET_WANDB_SILENT"


class _NoLitloggerTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(LITLOGGER_TIP)


def configure(verbose: bool) -> None:
    """The verbosity of this ``repro run`` and of the processes it starts (set again by each call)."""
    os.environ[VERBOSE] = "1" if verbose else "0"
    if verbose and os.environ.pop(_SET_BY_US, None):
        os.environ.pop(WANDB_SILENT, None)
    elif not verbose and WANDB_SILENT not in os.environ:
        os.environ[WANDB_SILENT] = os.environ[_SET_BY_US] = "true"


def install() -> None:
    """Add the filters (idempotent: a filter already there is not added twice); at the default
    verbosity, Lightning's INFO lines off."""
    level = logging.INFO if os.environ.get(VERBOSE) == "1" else logging.WARNING
    for name in LIGHTNING:
        logging.getLogger(name).setLevel(level)
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoLitloggerTip) for f in logger.filters):
            logger.addFilter(_NoLitloggerTip())
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )
