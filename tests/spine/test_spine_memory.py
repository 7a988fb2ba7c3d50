"""Peak memory on CPU: a fresh peak starts from the live memory, not from what the process freed before."""

import subprocess
import sys

import pytest

# Freed blocks that glibc keeps resident: a 32 MB tensor raises its mmap threshold, so the 4 MB tensors
# after it come from the heap, and small tensors kept between them stop the heap from shrinking.
FRAGMENTED_HEAP = """
import torch
from repro.train import memory
cpu = torch.device("cpu")
big = torch.ones(8_000_000)
del big
junk, keep = [], []
for _ in range(150):
    junk.append(torch.ones(1_000_000))
    keep.append(torch.ones(64))
del junk
before = memory.current_bytes(cpu)
assert memory.reset_peak(cpu)
print(before, memory.peak_bytes(cpu))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")
def test_a_fresh_cpu_peak_does_not_inherit_memory_freed_before_it():
    """A run trained after a larger one in the same process (`repro run` trains a manifest's runs in turn)
    measured the larger one's resident heap as its own peak: st-table4's n = 1024 runs read 1.57 GB after
    an n = 16384 run and 0.53 GB before it."""
    done = subprocess.run([sys.executable, "-c", FRAGMENTED_HEAP], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    before, peak = map(int, done.stdout.split())
    freed = 150 * 4_000_000
    assert before > freed  # the freed tensors were still resident
    assert peak < before - freed * 3 // 4
