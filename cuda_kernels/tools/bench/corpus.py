"""The matmul shapes of the benchmark's linear entries and their targets (scripts/check_targets.py), as (M, N, K) =
tokens x out_features x in_features of x @ weight.T, and of its batched entry. Plain Python, no import: the targets
script loads this file by path, without the package (which loads the extension).
"""

from __future__ import annotations

Shape = tuple[int, ...]

# (M, N, K): tokens x out_features x in_features of Llama-style layers (hidden 4096, MLP 11008 / 14336), and a
# decode-sized batch.
LINEAR_SHAPES: list[Shape] = [
    (1024, 4096, 4096),
    (4096, 4096, 4096),
    (8192, 11008, 4096),
    (8192, 4096, 11008),
    (4096, 14336, 4096),
    (2048, 2048, 2048),
    (256, 4096, 4096),
    (16, 4096, 4096),
]

# The shape corpus (issue 40): the linear layers of public model configs, x (tokens, in) @ weight (out, in).T, at 1
# to 16384 tokens, and the awkward classes of matmul (long K, irregular, few rows, tall-skinny, small K), as
# (M, N, K). Layers per model: q, k and v (one each for kv), o, gate and up as one weight, down.
MODEL_CONFIGS: dict[str, tuple[int, int, int, int]] = {  # name: (hidden, intermediate, q out, k / v out)
    "llama-3.2-1b": (2048, 8192, 2048, 512),
    "llama-3.1-8b": (4096, 14336, 4096, 1024),
    "llama-3.1-70b": (8192, 28672, 8192, 1024),
    "qwen2.5-7b": (3584, 18944, 3584, 512),
    "gemma-2-9b": (3584, 14336, 4096, 2048),
    "phi-3-mini": (3072, 8192, 3072, 3072),
    "gpt2": (768, 3072, 768, 768),
}
MODEL_TOKENS = (1, 16, 256, 2048, 16384)


def model_layer_shapes() -> list[Shape]:
    """Every (N, K) weight of MODEL_CONFIGS once (models share some), at every MODEL_TOKENS, as (M, N, K)."""
    weights: dict[tuple[int, int], None] = {}
    for hidden, inter, q, kv in MODEL_CONFIGS.values():
        for n, k in ((q, hidden), (kv, hidden), (hidden, q), (2 * inter, hidden), (hidden, inter)):
            weights[(n, k)] = None
    return [(m, n, k) for (n, k) in weights for m in MODEL_TOKENS]


AWKWARD_SHAPES: list[Shape] = [
    (256, 256, 524288),  # long K
    (1, 1024, 1048576),  # a matrix-vector product with K of a million
    (8205, 5921, 2949),  # irregular: no tile divides any side
    (32, 4096, 4096),  # few rows
    (64, 14336, 4096),
    (65536, 64, 4096),  # tall and skinny
    (65536, 4096, 64),  # small K
    (4096, 4096, 16),
]
CORPUS_SHAPES: list[Shape] = model_layer_shapes() + AWKWARD_SHAPES

# Batched products (torch.bmm's shapes) as (batch, M, N, K, k_major_b): attention's scores Q @ K^T (b a transposed
# view, k contiguous: k_major_b = 1) and its P @ V (b row-major) at head dims 128 and 64, prefill (2048 / 1024
# tokens) and decode (one query row per sequence and head: 8 sequences x 32 heads, context 2048), and a batch of
# large products.
BATCHED_SHAPES: list[Shape] = [
    (32, 2048, 2048, 128, 1),
    (32, 2048, 128, 2048, 0),
    (64, 1024, 1024, 64, 1),
    (64, 1024, 64, 1024, 0),
    (256, 1, 2048, 128, 1),
    (256, 1, 128, 2048, 0),
    (8, 2048, 2048, 2048, 0),
]
