"""Development tools: nothing here runs in a user's program unless it opts in (CUDA_KERNELS_JIT=1, the edit loop).

build_config.py  build_plan(): every decision of a build, for setup.py (which loads it by path) and the JIT alike
jit.py           CUDA_KERNELS_JIT=1: compile csrc/ on import into a cache, recompiling only what changed
dev.py           python -m cuda_kernels.dev OP (make dev): rebuild what changed, rerun OP's fast tests
dev_prefetch.py  the edit loop's imports, run beside the compiler
pycache.py       bytecode cached where PYTHONDONTWRITEBYTECODE is set (make, the tests, the edit loop)
new.py           python -m cuda_kernels.new NAME: a new elementwise op in every place at once (templates/)
doctor.py        python -m cuda_kernels.doctor: what a bug report needs, known mismatches explained
replay.py        python -m cuda_kernels.replay FILE: rerun a call saved by a repro dump
testing.py       the reference checks shared by the tests and the benchmark (matmul's error bound)
tuning.py        matmul_tuning(...): override the CUDA matmul kernels' own choices (scripts/tune_matmul.py)
bench/           the benchmark harness behind benchmark.py (its op table: bench/table.py)
"""

from cuda_kernels.tools.tuning import matmul_tuning

__all__ = ["matmul_tuning"]
