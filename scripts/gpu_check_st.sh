#!/usr/bin/env bash
# Sparse Transformer CUDA check, run once on a lent GPU machine from the repo root:
#   bash scripts/gpu_check_st.sh
# 1. FlexAttention kernel tests (values + gradients vs a float64 dense masked reference, bf16 model step)
# 2. `repro bench attention` on CUDA: strided/fixed FlexAttention (and the blocked kernel) vs causal
#    dense SDPA at the issue's setting (n=8192, stride 128, c=16, B=1, 8 heads, d=64, fp32)
# 3. longer sequences and bf16
# Everything lands in $OUT (default ./gpu_out); records are appended to *.jsonl as they complete, so a
# timeout keeps what was measured. Each step has its own timeout; total < 6 minutes. No downloads.
set -u
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
log() { echo "=== [gpu_check_st $(date +%H:%M:%S)] $*" | tee -a "$OUT/st_progress.log"; }
show() { python - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
           if k in ("pattern", "n", "impl", "dtype", "fwd_seconds", "fwd_bwd_seconds", "peak_memory_bytes",
                    "speedup_vs_dense", "theoretical_speedup", "memory_vs_dense", "error")})
PY
}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

log "python: $(command -v python)"
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" 2>&1 | tee "$OUT/st_env.txt"
if ! python -c "import repro.models.sparse_transformer" 2>/dev/null; then
  log "repro not importable: pip install -e . --no-deps"
  pip install -e . --no-deps -q 2>&1 | tail -3
fi

log "step 1/3: CUDA kernel tests (timeout 150 s)"
timeout 150 python -m pytest tests/models/test_st_kernels.py -k "cuda" -q -rs -p no:cacheprovider \
  --durations=5 --junitxml="$OUT/st_kernel_tests.xml" > "$OUT/st_kernel_tests.txt" 2>&1
log "step 1 exit $?"
tail -25 "$OUT/st_kernel_tests.txt"

log "step 2/3: bench n=8192 stride=128 c=16, B=1 H=8 d=64 fp32 (timeout 100 s)"
timeout 100 python -m repro.bench.attention --json --device cuda --n 8192 --stride 128 --c 16 \
  --patterns strided,fixed --impls flex,blocked --heads 8 --dim 64 --repeats 10 \
  --jsonl "$OUT/st_bench_cuda_8192.jsonl" > "$OUT/st_bench_cuda_8192.json" 2> "$OUT/st_bench_cuda_8192.err"
log "step 2 exit $?"
show "$OUT/st_bench_cuda_8192.jsonl"; tail -3 "$OUT/st_bench_cuda_8192.err"

log "step 3/3: bench n=32768 fp32, then n=8192 bf16 (timeout 70 s)"
timeout 70 bash -c "python -m repro.bench.attention --json --device cuda --n 32768 --stride 128 --c 16 \
  --patterns strided,fixed --impls flex --heads 8 --dim 64 --repeats 5 --jsonl '$OUT/st_bench_cuda_more.jsonl' \
  > '$OUT/st_bench_cuda_32768.json' 2> '$OUT/st_bench_cuda_32768.err'; \
  python -m repro.bench.attention --json --device cuda --n 8192 --stride 128 --c 16 --dtype bfloat16 \
  --patterns strided,fixed --impls flex --heads 8 --dim 64 --repeats 5 --jsonl '$OUT/st_bench_cuda_more.jsonl' \
  > '$OUT/st_bench_cuda_bf16.json' 2> '$OUT/st_bench_cuda_bf16.err'"
log "step 3 exit $?"
show "$OUT/st_bench_cuda_more.jsonl" 2>/dev/null; tail -2 "$OUT"/st_bench_cuda_32768.err "$OUT"/st_bench_cuda_bf16.err 2>/dev/null
log "done"
