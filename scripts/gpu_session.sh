#!/usr/bin/env bash
# The GPU-machine session that produces the figures quoted in docs/ and in issue notes, in stages that each fit
# one 10-minute device call:   bash scripts/gpu_session.sh build|test|bench|debug|sanitize|hyp|costs|multi
# Logs and JSON go to $OUT (default ./out). Build only what runs: TORCH_CUDA_ARCH_LIST=9.0a on an H100/H200.
set -u
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} NCCL_NVLS_ENABLE=0
OUT=${OUT:-out}; mkdir -p "$OUT"
# No compiler override: the build runs with the machine's own CC/CXX (the /opt/gcc wrappers that link libstdc++
# statically); setup.py links the shared C++ runtime itself (docs/debugging.md, "Segfault while raising an error").
PY=python3
stage=${1:?stage: build|test|bench|debug|sanitize|hyp|costs|multi|main|more|final}
log() { printf '\n### %s (t=%ss)\n' "$*" "$SECONDS"; }

build() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$OUT/gpu.txt"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"
  if [ -f cuda_kernels/_C*.so ] && $PY -c "import cuda_kernels" 2>/dev/null; then echo "already built"; return; fi
  rm -rf build
  local s=$SECONDS
  $PY -m pip install --no-build-isolation -v -e . >"$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  echo "clean build: $((SECONDS - s)) s" | tee -a "$OUT/times.txt"
  grep -E "^ *cuda_kernels:" "$OUT/build.log" | head -4  # what it builds, and the C++ runtime it links
  case $stage in build | test) ;; *) return ;; esac  # the one-file rebuild time only where it is reported
  touch csrc/cuda/square.cu
  s=$SECONDS
  $PY -m pip install --no-build-isolation -e . >"$OUT/rebuild.log" 2>&1
  echo "one-file (square.cu) rebuild: $((SECONDS - s)) s" | tee -a "$OUT/times.txt"
}

run_tests() {
  log "full test suite (not slow)"
  $PY -m pytest -q -rs -p no:cacheprovider -m "not slow" 2>&1 | tee "$OUT/pytest.log" | tail -25
  log "ncu"
  ncu --clock-control none -k square_kernel $PY benchmark.py -i 1 2>&1 | tee "$OUT/ncu_square.txt" | grep -E "square_kernel|Duration|DRAM Throughput|Memory Throughput|==PROF==|==ERR" | head -12
  ncu --clock-control none -k square_kernel $PY benchmark.py --op square -i 1 2>&1 | grep -E "square_kernel|Duration|DRAM Through" | head -4
  ncu --clock-control none --nvtx --nvtx-include "square/float32/16777216/" -k square_kernel $PY benchmark.py --op square --dtype float32 --size 2^24 --quick --no-progress 2>&1 | grep -cE "square_kernel" | sed 's/^/kernels profiled under the NVTX filter: /'
  ncu --clock-control none -k regex:matmul_kernel --section SpeedOfLight $PY benchmark.py --op matmul --size 4096 -i 1 2>&1 | tee "$OUT/ncu_matmul.txt" | grep -E "matmul_kernel|Duration|Compute \(SM\) Throughput" | head -6
  log "doctor"
  $PY -m cuda_kernels.doctor 2>&1 | tee "$OUT/doctor.txt" | tail -30
}

run_bench() {
  log "benchmark (full sweep)"
  $PY benchmark.py --no-progress --json "$OUT/h100.json" --plot "$OUT/h100.png" 2>&1 | tee "$OUT/bench.txt" | tail -5
}

run_ladder() {
  log "matmul ladder"
  $PY benchmark.py --no-progress --op matmul --dtype float32 --ladder --size 2048,4096,8192,4000,8192x1024x4096,1x4096x4096 --json "$OUT/ladder.json" 2>&1 | tee "$OUT/ladder.txt" | tail -60
  log "do_bench cross-check"
  $PY scripts/crosscheck_do_bench.py "$OUT/crosscheck.json" 2>&1 | tee "$OUT/crosscheck.txt" | tail -12
}

# The slow GPU tests (planted bug caught by memcheck, large tensors, soak) and the JIT loop's cold and warm
# times. make sanitize and the hypothesis gpu profile have their own stages (sanitize, hyp): each needs a call.
run_debug() {
  log "planted bug + slow GPU tests"
  $PY -m pytest -q -rs -p no:cacheprovider tests/test_sanitize.py tests/test_large.py tests/test_soak.py 2>&1 | tee "$OUT/slow.log" | tail -6
  log "JIT loop: cold and warm import"
  export CUDA_KERNELS_JIT_DIR=/tmp/jit
  s=$SECONDS; CUDA_KERNELS_JIT=1 $PY -c "import cuda_kernels as c; print(c.build_info()['mode'])"; echo "JIT cold: $((SECONDS - s)) s" | tee -a "$OUT/times.txt"
  for i in 1 2; do $PY - <<'PY' 2>&1 | tee -a "$OUT/times.txt"
import os, time
os.environ["CUDA_KERNELS_JIT"] = "1"
t = time.perf_counter(); import cuda_kernels; print(f"JIT warm import: {time.perf_counter() - t:.2f} s")
PY
  done
}

# make sanitize on the whole GPU suite, one tool at a time, each bounded by what is left of SANITIZE_BUDGET
# seconds (default 480) counted from the start of this script, so the stage fits one device call.
run_sanitize() {
  local tool left
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
    left=$(( ${SANITIZE_BUDGET:-480} - SECONDS ))
    if [ "$left" -lt 30 ]; then echo "sanitize: $tool NOT RUN (budget spent)" | tee -a "$OUT/sanitize.txt"; continue; fi
    log "make sanitize: $tool (bounded to $left s)"
    SANITIZE_REQUIRE=1 PYTHON=$PY SANITIZE_TOOLS=$tool SANITIZE_LOG_DIR=$OUT/sanitize timeout "$left" \
      bash scripts/sanitize.sh 2>&1 | tee -a "$OUT/sanitize.txt" | tail -12
    [ "${PIPESTATUS[0]}" = 124 ] && echo "sanitize: $tool TIMED OUT after $left s" | tee -a "$OUT/sanitize.txt"
    grep -A12 "slowest" "$OUT/sanitize/$tool.log" | head -14 >> "$OUT/sanitize.txt"
  done
  (cd "$OUT" && tar czf sanitize-logs.tgz --remove-files sanitize 2>/dev/null)
}

# The larger hypothesis profile on the GPU, bounded to HYP_BUDGET seconds (default 300).
run_hyp() {
  log "hypothesis gpu profile"
  HYPOTHESIS_PROFILE=gpu timeout "${HYP_BUDGET:-300}" $PY -m pytest -v -x -p no:cacheprovider \
    --hypothesis-show-statistics tests/test_properties.py -k cuda 2>&1 | tee "$OUT/hyp.log" | tail -40
}

# What the debugging switches cost (release, CUDA_LAUNCH_BLOCKING=1, LINEINFO=1, DEBUG=1) and build times.
run_costs() {
  log "debug costs"
  export CUDA_KERNELS_JIT_DIR=/tmp/jit
  $PY scripts/debug_costs.py --json "$OUT/debug_costs.json" 2>&1 | tee "$OUT/costs.txt"
}

case $stage in
build) build ;;
test) build; run_tests ;;
bench) build; run_bench; run_ladder ;;
debug) build; run_debug ;;
main) build; run_tests; run_bench ;;
more) build; run_ladder; run_debug ;;
final) build; run_bench; run_ladder; run_debug ;;
sanitize) build; run_sanitize ;;
hyp) build; run_hyp ;;
costs) build; run_costs ;;
multi)
  build
  log "two-GPU and NCCL tests"
  $PY -m pytest -v -rs -p no:cacheprovider tests/test_multi_gpu.py tests/test_distributed.py 2>&1 | tee "$OUT/multi.log" | tail -25
  torchrun --nproc_per_node=2 examples/ddp_train.py --dtype float32 2>&1 | tail -5
  ;;
esac
echo "stage $stage done in $SECONDS s"
# At most 8 files come back from the device machine: pack the logs, keep JSON and plots apart.
(cd "$OUT" && tar czf "logs-$stage.tgz" --remove-files ./*.txt ./*.log 2>/dev/null)
