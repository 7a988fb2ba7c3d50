"""repro: reproduce Adaptive Attention Span and Sparse Transformers from declarative manifests."""

__version__ = "0.1.0"

import os as _os

# OpenMP threads that busy-wait between parallel regions collapse when another process shares the
# cores (measured: the blocked sparse kernels ran 6x slower on a loaded 2-core machine). Sleeping
# costs nothing measurable when the machine is idle. Must be set before torch is first imported.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
