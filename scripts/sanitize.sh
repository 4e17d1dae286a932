#!/usr/bin/env bash
# make sanitize: the CUDA tests under compute-sanitizer memcheck, racecheck, initcheck and synccheck.
#
# Prints one line per tool with its error count; exits 1 if any tool found an error or any test failed.
# Skips (exit 0, with the reason) when there is no GPU, no CUDA build of the extension or no compute-sanitizer;
# SANITIZE_REQUIRE=1 turns a skip into a failure (use it where a GPU is expected, so a skip cannot pass as clean).
#
# Knobs (environment):
#   SANITIZE_TOOLS      tools to run                     (default: memcheck racecheck initcheck synccheck)
#   SANITIZE_MARK       pytest -m expression             (default: "gpu and not slow": the CUDA cases)
#   SANITIZE_K          pytest -k expression             (default: none)
#   SANITIZE_TESTS      test paths                       (default: tests/)
#   SANITIZE_KERNEL     check only kernels whose mangled name matches this regular expression
#                       (default: "square_kernel|matmul_kernel", the project's kernels, except for initcheck: "all",
#                       every kernel, torch's too. initcheck sees only the writes of the kernels it checks, so with a
#                       filter, data written by torch.full or torch.randn looks uninitialized.)
#   SANITIZE_FLAGS      extra compute-sanitizer flags, e.g. "--print-limit 20"
#   SANITIZE_LOG_DIR    full logs                        (default: build/sanitize)
#   COMPUTE_SANITIZER   the binary                       (default: on PATH, else $CUDA_HOME/bin, /usr/local/cuda/bin)
#   PYTHON              the interpreter                  (default: python)
#
# The tests run with PYTORCH_NO_CUDA_MEMORY_CACHING=1: torch's caching allocator hands out slices of large
# cudaMalloc blocks, so an access just past a tensor stays inside the block and memcheck cannot see it, and a
# reused block looks initialized to initcheck. Each tensor gets its own cudaMalloc instead (slower, exact).
# CUDA_KERNELS_SANITIZE=<tool> is exported: under racecheck, initcheck and synccheck the tests marked `heavy`
# skip (tests/conftest.py: the same kernels on 999^3 and larger shapes take minutes there; memcheck runs them),
# and hypothesis uses its small "sanitize" profile.
# tests/tools/test_sanitize.py is left out: it runs compute-sanitizer itself, on a planted bug.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python}
TOOLS=${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
MARK=${SANITIZE_MARK:-gpu and not slow}
LOG_DIR=${SANITIZE_LOG_DIR:-build/sanitize}
read -r -a TESTS <<< "${SANITIZE_TESTS:-tests/}"
read -r -a EXTRA <<< "${SANITIZE_FLAGS:-}"

skip() {
    echo "sanitize: SKIPPED: $*"
    if [ "${SANITIZE_REQUIRE:-0}" = 1 ]; then
        echo "sanitize: SANITIZE_REQUIRE=1, so this is a failure"
        exit 1
    fi
    exit 0
}

SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
if [ -z "$SAN" ]; then
    for home in "${CUDA_HOME:-}" /usr/local/cuda; do
        if [ -n "$home" ] && [ -x "$home/bin/compute-sanitizer" ]; then
            SAN="$home/bin/compute-sanitizer"
            break
        fi
    done
fi
[ -n "$SAN" ] || skip "compute-sanitizer not found (it comes with the CUDA toolkit, in \$CUDA_HOME/bin)"

# SANITIZE_GPU_CHECK=0 skips this check (tests of this script use it with a stand-in compute-sanitizer).
if [ "${SANITIZE_GPU_CHECK:-1}" = 1 ]; then
    state=$("$PYTHON" -c '
import torch
if not torch.cuda.is_available():
    print("no CUDA device is visible")
else:
    import cuda_kernels
    print("ok" if cuda_kernels.build_info()["cuda"] else "the extension was built without CUDA (WITH_CUDA=0)")
' 2>&1 | tail -n 1)
    [ "$state" = ok ] || skip "$state"
fi

mkdir -p "$LOG_DIR"
k_args=()
[ -n "${SANITIZE_K:-}" ] && k_args=(-k "$SANITIZE_K")

echo "sanitize: $SAN, tools: $TOOLS; tests: pytest -m \"$MARK\" ${SANITIZE_K:+-k \"$SANITIZE_K\"} ${TESTS[*]}"
failed=0
for tool in $TOOLS; do
    log="$LOG_DIR/$tool.log"
    default_kernels="square_kernel|matmul_kernel"
    [ "$tool" = initcheck ] && default_kernels=all
    kernels=${SANITIZE_KERNEL:-$default_kernels}
    filter=()
    [ "$kernels" != all ] && filter=(--kernel-name "regex=$kernels")
    start=$SECONDS
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDA_KERNELS_SANITIZE=$tool \
        "$SAN" --tool "$tool" --error-exitcode 99 --target-processes all ${filter[@]+"${filter[@]}"} ${EXTRA[@]+"${EXTRA[@]}"} \
        "$PYTHON" -m pytest -v -rs -p no:cacheprovider -o console_output_style=times --durations=10 -m "$MARK" ${k_args[@]+"${k_args[@]}"} \
        --ignore=tests/tools/test_sanitize.py "${TESTS[@]}" > "$log" 2>&1
    rc=$?
    # One summary line per process the sanitizer followed: "ERROR SUMMARY: N errors", or for racecheck
    # "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)" (a warning is a hazard too: counted).
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error|\([0-9]+ errors?, [0-9]+ warnings?\)' "$log" |
        tr -d '(,' | awk '/SUMMARY/ {n += $3; next} {n += $1 + $3} END {print n + 0}')
    summaries=$(grep -cE '(ERROR|RACECHECK) SUMMARY' "$log")
    # pytest's last line, e.g. "12 passed, 40 deselected in 3.1s".
    tests=$(grep -E '^=* *[0-9]+ (passed|failed|skipped|deselected|error)' "$log" | tail -n 1 | tr -d '=' | xargs)
    status=ok
    if [ "$errors" -gt 0 ] || [ "$rc" -ne 0 ] || [ "$summaries" -eq 0 ]; then
        status=FAIL
        failed=1
    fi
    printf 'sanitize: %-9s %-4s %s errors, exit %s, %ss, kernels: %s, tests: %s (log: %s)\n' \
        "$tool" "$status" "$errors" "$rc" "$((SECONDS - start))" "$kernels" "${tests:-none}" "$log"
    if [ "$status" = FAIL ]; then
        [ "$rc" -eq 5 ] && echo "    pytest collected no test: check SANITIZE_MARK / SANITIZE_K"
        [ "$summaries" -eq 0 ] && echo "    no summary line in the log: compute-sanitizer did not run to the end"
        # The first reports, then pytest's own summary.
        grep -E '^========= +(Invalid|Race|Uninitialized|Barrier|Program hit|Error|Warning|Potential|Misaligned)' \
            "$log" | head -n 10 | sed 's/^/    /'
        tail -n 5 "$log" | sed 's/^/    /'
    fi
done
if [ "$failed" = 1 ]; then
    echo "sanitize: FAILED (full logs in $LOG_DIR/)"
    exit 1
fi
echo "sanitize: clean"
