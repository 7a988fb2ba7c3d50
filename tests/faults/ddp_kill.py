"""torchrun's worker for the DDP kill test: ``repro ARGV[2:]`` in which every rank SIGKILLs itself at
the end of step ARGV[1] (all ranks have passed that step's all-reduce, so none is left waiting)."""

import signal
import sys

from faultkit import SignalAt

from repro import cli
from repro.train import runner

plain = runner.run_spec
runner.run_spec = lambda *a, **k: plain(*a, **{**k, "callbacks": [SignalAt(int(sys.argv[1]), signal.SIGKILL)]})
sys.exit(cli.main(sys.argv[2:]))
