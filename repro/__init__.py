"""repro: reproduce Adaptive Attention Span and Sparse Transformers from declarative manifests."""

__version__ = "0.1.0"

import os as _os

# OpenMP threads that busy-wait between parallel regions collapse when another process shares the
# cores (measured: the blocked sparse kernels ran 6x slower on a loaded 2-core machine). Sleeping
# costs nothing measurable when the machine is idle. Must be set before torch is first imported.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The instruction set the float32 kernels may use (repro/cpu_isa.py): AVX2 on every x86-64 CPU that has
# it, so that an AVX-512 machine computes the bits an AVX2 one does. Also before torch is first imported.
from repro import cpu_isa as _cpu_isa  # noqa: E402

_cpu_isa.pin()
