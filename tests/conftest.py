"""Import repro before any test module imports torch: repro sets OMP_WAIT_POLICY=PASSIVE, which must
precede torch's first import (spinning OpenMP threads make every small parallel region cost a time slice
on a shared CPU: the sparse kernels' tests ran 50x slower without it)."""

import repro  # noqa: F401
