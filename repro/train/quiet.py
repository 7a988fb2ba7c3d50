"""Three lines of other libraries' chatter that every run printed, silenced where they come from (and
nothing else of theirs): Lightning's tip to install litlogger (an INFO record of its rank-zero logger),
the FutureWarning of torch's ``LeafSpec`` that Lightning's pytree helper instantiates, and W&B's warning
that the ``anonymous`` setting has no effect (Lightning's WandbLogger passes it; see
:class:`repro.track.loggers.SpanViewLogger`)."""

from __future__ import annotations

import logging
import warnings

LITLOGGER_TIP = "💡 Tip: For seamless cloud logging"
LIGHTNING_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class _NoLitloggerTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(LITLOGGER_TIP)


def install() -> None:
    """Add the filters (idempotent: a filter already there is not added twice)."""
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
