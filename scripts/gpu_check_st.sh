#!/usr/bin/env bash
# Sparse Transformer CUDA check, run once on a lent GPU machine from the repo root:
#   bash scripts/gpu_check_st.sh
# 1. FlexAttention kernel tests (values + gradients vs a float64 dense masked reference, bf16 model step)
# 2. `repro bench attention` on CUDA: strided/fixed FlexAttention vs causal dense SDPA
# Everything lands in $OUT (default ./gpu_out). Each step has its own timeout; total < 6 minutes.
# No downloads: torch with CUDA must already be installed.
set -u
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
log() { echo "=== [gpu_check_st $(date +%H:%M:%S)] $*" | tee -a "$OUT/st_progress.log"; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

log "python: $(command -v python)"
python - <<'PY' 2>&1 | tee "$OUT/st_env.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0))
PY
if ! python -c "import repro.models.sparse_transformer" 2>/dev/null; then
  log "repro not importable: pip install -e . --no-deps"
  pip install -e . --no-deps -q 2>&1 | tail -3
fi

log "step 1/3: CUDA kernel tests (timeout 150 s)"
timeout 150 python -m pytest tests/models/test_st_kernels.py -k "cuda" -q -rs -p no:cacheprovider \
  --junitxml="$OUT/st_kernel_tests.xml" 2>&1 | tee "$OUT/st_kernel_tests.txt" | tail -25
log "step 1 exit ${PIPESTATUS[0]}"

log "step 2/3: bench n=8192 stride=128 c=16, B=1 H=8 d=64 fp32 (timeout 120 s)"
timeout 120 python -m repro.bench.attention --json --device cuda --n 8192 --stride 128 --c 16 \
  --patterns strided,fixed --impls flex,blocked --heads 8 --dim 64 --repeats 10 \
  > "$OUT/st_bench_cuda_8192.json" 2> "$OUT/st_bench_cuda_8192.err"
log "step 2 exit $?"
python -m json.tool "$OUT/st_bench_cuda_8192.json" 2>/dev/null | grep -E '"(pattern|impl|fwd_seconds|fwd_bwd_seconds|peak_memory_bytes|speedup_vs_dense|theoretical_speedup)"' | paste - - - - - - -
tail -3 "$OUT/st_bench_cuda_8192.err"

log "step 3/3: bench long sequences n=32768,65536 fp32 and bf16 (timeout 60 s each)"
timeout 60 python -m repro.bench.attention --json --device cuda --n 32768,65536 --stride 128 --c 16 \
  --patterns strided,fixed --impls flex --heads 8 --dim 64 --repeats 5 \
  > "$OUT/st_bench_cuda_long_fp32.json" 2> "$OUT/st_bench_cuda_long_fp32.err"
log "step 3a exit $?"
timeout 60 python -m repro.bench.attention --json --device cuda --n 8192,32768 --stride 128 --c 16 \
  --patterns strided,fixed --impls flex --heads 8 --dim 64 --repeats 5 --dtype bfloat16 \
  > "$OUT/st_bench_cuda_bf16.json" 2> "$OUT/st_bench_cuda_bf16.err"
log "step 3b exit $?"
for f in "$OUT"/st_bench_cuda_long_fp32.json "$OUT"/st_bench_cuda_bf16.json; do
  python -m json.tool "$f" 2>/dev/null | grep -E '"(pattern|n|impl|dtype|fwd_bwd_seconds|speedup_vs_dense)"' | paste - - - - - -
done
log "done"
