"""Every ``repro`` command, in the order ``repro --help`` lists them: each declared by its own module as
a :class:`repro.registry.Command` (its name, help, arguments and handler), collected here."""

from __future__ import annotations

from repro.cli import bench, data, manifests, pretrained, report, retrain, run, sample, status, tracking, verify
from repro.registry import Command, Registry

COMMANDS: Registry[Command] = Registry(
    "command",
    [
        manifests.LIST,
        manifests.SHOW,
        manifests.VALIDATE,
        run.COMMAND,
        status.COMMAND,
        report.REPORT,
        report.RENDERERS,
        verify.COMMAND,
        pretrained.COMMAND,
        retrain.COMMAND,
        tracking.SYNC,
        tracking.PULL,
        tracking.DASHBOARD,
        sample.COMMAND,
        bench.COMMAND,
        data.COMMAND,
    ],
)
