"""Importing the suite changes nothing of the process: a notebook that imports repro (or the CLI, the
runner, the models) keeps its torch threads and its environment (after the libraries' own imports, which
set variables of theirs); runs pin threads, the instruction set
and OpenMP's wait policy where they start (repro.train.environment, repro.cli.command)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

MODULES = ["repro", "repro.cli", "repro.config.lookup", "repro.train.runner", "repro.train.launch", "repro.models"]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_importing_the_suite_changes_no_thread_count_and_no_environment_variable(threads):
    code = textwrap.dedent(
        f"""
        import importlib, json, os
        import lightning, torch, torch.nn.attention.flex_attention  # theirs: Lightning and inductor set variables
        before = (torch.get_num_threads(), dict(os.environ))
        for name in {MODULES!r}:
            importlib.import_module(name)
        after = (torch.get_num_threads(), dict(os.environ))
        print(json.dumps({{"before": before, "after": after}}))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "REPRO_", "ATEN_"))}
    env.update(OMP_NUM_THREADS=threads, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"][0] == int(threads)
    (threads_before, env_before), (threads_after, env_after) = seen["before"], seen["after"]
    changed = {
        k: (env_before.get(k), env_after.get(k))
        for k in {*env_before, *env_after}
        if env_before.get(k) != env_after.get(k)
    }
    assert threads_after == threads_before and changed == {}
