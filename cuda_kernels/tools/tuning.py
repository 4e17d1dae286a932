"""matmul_tuning(...): overrides of the CUDA matmul kernels' own choices, for tests and scripts/tune_matmul.py.

    from cuda_kernels.tools import matmul_tuning

    with matmul_tuning(config06="16x128x16_w16x32_t4x4_s4_b4", splits06=2):
        cuda_kernels.matmul(a, b, variant=6)   # step 6 with that tile configuration, K split in 2

Each keyword is one knob of the extension's private op torch.ops.cuda_kernels._matmul_tuning(knob, value), which
returns the knob's previous value ("" = no override). Values are passed as str(value); the extension checks them.
On exit every knob is set back to what it was, also when the block raises. The overrides are process-wide, not
per thread. Which configurations exist depends on the build: the tuning build compiles more of them,

    NVCC_APPEND_FLAGS=-DCUDA_KERNELS_MATMUL_TUNING pip install --no-build-isolation -e .
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

NO_TUNING = "cuda_kernels.matmul_tuning: this build has no CUDA kernels to tune"

Value = str | int


def _tuning_op() -> Callable[[str, str], str]:
    """torch.ops.cuda_kernels._matmul_tuning; RuntimeError(NO_TUNING) where the build has none (CPU-only)."""
    import torch

    import cuda_kernels  # noqa: F401  (loads the extension, which registers the op)

    try:
        return torch.ops.cuda_kernels._matmul_tuning
    except (AttributeError, RuntimeError):
        raise RuntimeError(NO_TUNING) from None


@contextmanager
def matmul_tuning(
    *,
    config06: Value | None = None,
    splits06: Value | None = None,
    config08: Value | None = None,
    config_fp64: Value | None = None,
    smem_limit_bytes: Value | None = None,
    matvec_blocks_per_sm: Value | None = None,
    matvec_mma_min_rows: Value | None = None,
    matvec_cluster_splits: Value | None = None,
    block_n12: Value | None = None,
    stream_k12: Value | None = None,
    k_splits12: Value | None = None,
    block_m12: Value | None = None,
) -> Iterator[None]:
    """Overrides the given knobs for the duration of the block; a knob left None keeps its current value.

    config06 / splits06: step 6's tile configuration (by name) and split-K factor; config08: step 8's configuration;
    config_fp64: the float64 tensor-core kernel's configuration; smem_limit_bytes: the shared memory per block the
    launchers believe the GPU allows (to run the configurations of GPUs with less); matvec_blocks_per_sm,
    matvec_mma_min_rows, matvec_cluster_splits: the matrix-vector kernel's split of K, the rows from which it uses
    the tensor cores, and its cap on splits per cluster; block_n12, stream_k12 and k_splits12: step 12's tile
    width (64, 128, 256), stream-K ("on" wherever the tiles allow it, "off") and split-K clusters (blocks per tile,
    1 for none, 2, 4 or 8; the 64 x 64, 128 x 64 and 128 x 128 tiles split); block_m12: its tile rows (64: 64 x 64
    tiles of one consumer warpgroup, 128: the others). Raises RuntimeError on a build without CUDA kernels.
    """
    overrides = {
        "config06": config06,
        "splits06": splits06,
        "config08": config08,
        "config_fp64": config_fp64,
        "smem_limit_bytes": smem_limit_bytes,
        "matvec_blocks_per_sm": matvec_blocks_per_sm,
        "matvec_mma_min_rows": matvec_mma_min_rows,
        "matvec_cluster_splits": matvec_cluster_splits,
        "block_n12": block_n12,
        "stream_k12": stream_k12,
        "k_splits12": k_splits12,
        "block_m12": block_m12,
    }
    op = _tuning_op()
    previous: list[tuple[str, str]] = []
    try:
        for knob, value in overrides.items():
            if value is not None:
                previous.append((knob, op(knob, str(value))))
        yield
    finally:
        for knob, value in reversed(previous):
            op(knob, value)
