#!/usr/bin/env bash
# The throughput numbers of docs/throughput.md, taken on an IDLE machine (nothing else running: check
# `uptime` first; about 8 minutes on 2 cores), from the repo root:
#   bash scripts/measure_throughput.sh
# 1. the machine's GEMM peak, measured again and cached (fp32, bf16)
# 2. `repro bench st-step` at the cpu scale's widths (4 x 128, 4 heads, stride 128, c 16), dense vs
#    fixed vs strided interleaved, n = 512 (batch 8), 1024 (batch 4), 2048 (batch 2), fp32; n = 512 bf16
#    (bf16 only on a CPU with AVX-512)
# 3. `repro bench adaptive` at the tiny/cpu shape (4 x 64, d_ff 256, 4 heads, block 64, batch 16, S 1024):
#    fixed vs adaptive spans z = 40 and 120 vs the dynamic span, torch's default threads, fp32 and bf16
# Each bench measures into a scratch results root; its records (with model FLOP/s and MFU) are copied to
# results/bench/throughput-<name>.json, and a table of them is printed. The load average before and
# after each step is printed too: a load well above the bench's own threads means the numbers are not clean.
set -u
REPRO="${REPRO:-python -m repro}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
SCRATCH="$(mktemp -d)"
mkdir -p results/bench
step() {  # name, then the bench's arguments
  local name="$1"; shift
  echo "=== $name  (load $(cut -d' ' -f1 /proc/loadavg))"
  if $REPRO --results "$SCRATCH/$name" bench "$@" > "$SCRATCH/$name.out" 2>&1; then
    cp "$SCRATCH/$name/bench/$1.json" "results/bench/throughput-$name.json"
  else
    tail -3 "$SCRATCH/$name.out"
  fi
}
echo "=== peak  (load $(cut -d' ' -f1 /proc/loadavg))"
python -m repro.train.throughput --measure
ST="--layers 4 --d-model 128 --heads 4 --stride 128 --c 16 --patterns fixed,strided --repeats 7"
step st-step-n512 st-step --n 512 --batch 8 $ST
step st-step-n1024 st-step --n 1024 --batch 4 $ST
step st-step-n2048 st-step --n 2048 --batch 2 $ST
# bf16 only where the CPU has AVX-512 (with AVX2 alone torch's bf16 matmul is a sub-GFLOP/s fallback)
AVX512=$(python -c "import torch; print(int('AVX512' in torch.backends.cpu.get_cpu_capability()))")
[ "$AVX512" = 1 ] && step st-step-n512-bf16 st-step --n 512 --batch 8 --precision bf16 $ST
AS="--layers 4 --d-model 64 --d-ff 256 --heads 4 --block 64 --batch 16 --span-limit 1024 --spans 40,120 --dynamic --steps 15 --warmup 3 --threads 0"
step adaptive-tiny adaptive $AS
[ "$AVX512" = 1 ] && step adaptive-tiny-bf16 adaptive $AS --precision bf16
[ "$AVX512" = 1 ] || echo "=== bf16 skipped: $(python -c 'import torch; print(torch.backends.cpu.get_cpu_capability())') only"
echo "=== done  (load $(cut -d' ' -f1 /proc/loadavg))"
python - <<'PY'
import glob, json
for path in sorted(glob.glob("results/bench/throughput-*.json")):
    for r in json.load(open(path)):
        case = r.get("pattern") or (f"{r['kind']} z={r['span']}" if r.get("span") is not None else r.get("kind"))
        sps, mfu = r.get("seconds_per_step"), r.get("mfu")
        ratio = r.get("speedup_vs_dense") or r.get("speedup_vs_fixed")
        print(f"{path.split('throughput-')[1][:-5]:22} {case:18} "
              + (f"{sps:.4f} s/step  MFU {100 * mfu:5.1f}%  x{ratio or 1:.2f} vs baseline" if sps and mfu else r.get("error", "")))
PY
