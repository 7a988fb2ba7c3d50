#!/usr/bin/env bash
# Sparse Transformer CUDA check, run once on a lent GPU machine from the repo root:
#   bash scripts/gpu_check_st.sh
# Measures the GPU targets of issue 14 (records with the environment, appended as they complete):
# 1. FlexAttention kernel tests (values + gradients vs a float64 dense masked reference, bf16 model step)
# 2. `repro bench attention`, bf16, B=1, 8 heads, d=64, stride 128, c=16, fwd+bwd, FlexAttention vs causal
#    dense SDPA (flash) interleaved: n = 8192 and 16384 (targets: >= 1.5x both patterns at 8192;
#    strided >= 4x, fixed >= 2.5x at 16384; peak memory <= dense's), then n = 65536 (strided >= 12x,
#    fixed >= 5x)
# 3. `repro bench st-step`: a training step at `small` widths (12 layers, d 512, 8 heads, stride 64, c 16),
#    n = 8192, bf16 autocast, dense vs fixed vs strided (target: fixed faster than dense)
# Everything lands in $OUT (default ./gpu_out). Each step has its own timeout; total < 8 minutes.
# No downloads. Copy the jsonl files to results/bench/ to store them.
set -u
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
log() { echo "=== [gpu_check_st $(date +%H:%M:%S)] $*" | tee -a "$OUT/st_progress.log"; }
show() { python - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
           if k in ("pattern", "n", "impl", "dtype", "precision", "fwd_bwd_seconds", "seconds_per_step",
                    "peak_memory_bytes", "speedup_vs_dense", "theoretical_speedup", "memory_vs_dense",
                    "flops_ratio_vs_dense", "error")})
PY
}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

log "python: $(command -v python)"
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" 2>&1 | tee "$OUT/st_env.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$OUT/st_env.txt" 2>&1
if ! python -c "import repro.models.sparse_transformer" 2>/dev/null; then
  log "repro not importable: pip install -e . --no-deps"
  pip install -e . --no-deps -q 2>&1 | tail -3
fi

log "step 1/3: CUDA kernel tests (timeout 150 s)"
timeout 150 python -m pytest tests/models/test_st_kernels.py -k "cuda" -q -rs -p no:cacheprovider \
  --durations=5 --junitxml="$OUT/st_kernel_tests.xml" > "$OUT/st_kernel_tests.txt" 2>&1
log "step 1 exit $?"
tail -25 "$OUT/st_kernel_tests.txt"

log "step 2/3: bench attention bf16, n=8192,16384 then 65536 (timeouts 150 s + 100 s)"
timeout 150 python -m repro.bench.attention --json --device cuda --dtype bfloat16 --n 8192,16384 --stride 128 \
  --c 16 --patterns strided,fixed --impls flex --heads 8 --dim 64 --repeats 10 \
  --jsonl "$OUT/st_bench_cuda_bf16.jsonl" > "$OUT/st_bench_cuda_bf16.json" 2> "$OUT/st_bench_cuda_bf16.err"
log "step 2a exit $?"
timeout 100 python -m repro.bench.attention --json --device cuda --dtype bfloat16 --n 65536 --stride 128 \
  --c 16 --patterns strided,fixed --impls flex --heads 8 --dim 64 --repeats 5 \
  --jsonl "$OUT/st_bench_cuda_bf16.jsonl" > "$OUT/st_bench_cuda_bf16_65536.json" 2> "$OUT/st_bench_cuda_bf16_65536.err"
log "step 2b exit $?"
show "$OUT/st_bench_cuda_bf16.jsonl"; tail -3 "$OUT"/st_bench_cuda_bf16*.err

log "step 3/3: bench st-step, small widths, n=8192, bf16 (timeout 150 s)"
timeout 150 python -m repro.bench.st_step --json --device cuda --precision bf16 --n 8192 --layers 12 \
  --d-model 512 --heads 8 --stride 64 --c 16 --patterns fixed,strided --repeats 5 \
  --jsonl "$OUT/st_step_cuda_small.jsonl" > "$OUT/st_step_cuda_small.json" 2> "$OUT/st_step_cuda_small.err"
log "step 3 exit $?"
show "$OUT/st_step_cuda_small.jsonl" 2>/dev/null; tail -3 "$OUT/st_step_cuda_small.err"
log "done"
