"""A Llama-style decoder in plain torch, built either from torch's modules or from cuda_kernels', and compared.

The model (random weights, nothing downloaded): token embedding; per layer RMSNorm -> attention (q/k/v/o projections
without bias, rotary embeddings, grouped-query attention through F.scaled_dot_product_attention, a KV cache for
decoding) -> residual, RMSNorm -> SwiGLU MLP -> residual; a final RMSNorm and an LM head without bias.

`build_model(config, kind)` picks the building blocks; the model code is the same for both kinds:
  - "torch": torch.nn.Linear for every projection, F.rms_norm, and the MLP as gate_up -> chunk -> F.silu(g) * u
    -> down.
  - "ours": cuda_kernels.Linear for every projection, cuda_kernels.rms_norm, and the MLP's gate_up as
    cuda_kernels.Linear(..., activation="swiglu"), which returns silu(g) * u itself (no separate silu and multiply).
Both kinds have the same parameter names and shapes, so one state dict loads into either.

Run it:
    python examples/llama.py                          # on a GPU: the default config (hidden 2048, 4 layers), bf16
    python examples/llama.py --tiny --device cpu      # a tiny config on the CPU, float32, in seconds
    python examples/llama.py --run decode --cuda-graph --json out.json   # decode steps as CUDA graph replays
It prints the prefill and decode times of both kinds and their ratio (torch / ours: above 1 means ours is faster),
the largest logit difference between them, and the largest difference between their training loss curves.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import cuda_kernels

KINDS = ("torch", "ours")
RUNS = ("prefill", "decode", "train")


@dataclass
class LlamaConfig:
    """Model shape. head_dim = hidden_size // num_heads; num_heads must be a multiple of num_kv_heads."""

    vocab_size: int = 32000
    hidden_size: int = 2048
    num_layers: int = 4
    num_heads: int = 16
    num_kv_heads: int = 4
    intermediate_size: int = 5632
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    max_positions: int = 4096

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def tiny(cls) -> LlamaConfig:
        """A config that runs in well under a second per step on a CPU, for tests and --tiny."""
        return cls(
            vocab_size=256,
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            num_kv_heads=2,
            intermediate_size=128,
            max_positions=256,
        )


# ---------------------------------------------------------------------------------------------------------------------
# The switch: what each kind builds its projections and norms from.


@dataclass(frozen=True)
class Blocks:
    """The building blocks of one kind.

    linear(in_features, out_features, activation, device, dtype) -> an nn.Linear without bias (weight (out, in)).
    rms_norm(x, weight, eps) -> x normalized over its last dim, times weight.
    fused_swiglu: linear(..., activation="swiglu") returns silu(gate) * up itself; otherwise the MLP applies it.
    """

    kind: str
    linear: Callable[..., nn.Linear]
    rms_norm: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]
    fused_swiglu: bool


def _torch_linear(
    in_features: int, out_features: int, activation: str | None, device: torch.device, dtype: torch.dtype
) -> nn.Linear:
    if activation is not None:
        raise ValueError(f"the torch kind applies activations outside the Linear, got {activation!r}")
    return nn.Linear(in_features, out_features, bias=False, device=device, dtype=dtype)


def _our_linear(
    in_features: int, out_features: int, activation: str | None, device: torch.device, dtype: torch.dtype
) -> nn.Linear:
    return cuda_kernels.Linear(in_features, out_features, bias=False, activation=activation, device=device, dtype=dtype)


def _torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _our_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return cuda_kernels.rms_norm(x, weight, eps)


def blocks_for(kind: str) -> Blocks:
    """The building blocks of `kind` ("torch" or "ours")."""
    if kind == "torch":
        return Blocks("torch", _torch_linear, _torch_rms_norm, fused_swiglu=False)
    if kind == "ours":
        return Blocks("ours", _our_linear, _our_rms_norm, fused_swiglu=True)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


# ---------------------------------------------------------------------------------------------------------------------
# The model.


class RMSNorm(nn.Module):
    """RMSNorm over the last dim with a learned weight (dim,), through the kind's rms_norm."""

    def __init__(self, dim: int, eps: float, blocks: Blocks, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))
        self._rms_norm = blocks.rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._rms_norm(x, self.weight, self.eps)


class KVCache:
    """Keys and values of every layer for up to max_len positions: k[i], v[i] are (batch, num_kv_heads, max_len,
    head_dim) in the model's dtype. `length` positions are filled; a forward with the cache writes its tokens at
    [length, length + seq) and advances it. Set `length` back to re-run a step over the same context."""

    def __init__(self, config: LlamaConfig, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> None:
        shape = (batch, config.num_kv_heads, max_len, config.head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_layers)]
        self.batch = batch
        self.max_len = max_len
        self.length = 0


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x (batch, heads, seq, head_dim) with cos, sin (seq, head_dim) in x's dtype (the halves
    convention of Llama's reference code: dims i and i + head_dim/2 rotate together)."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig, blocks: Blocks, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        hidden, kv = config.hidden_size, config.num_kv_heads * config.head_dim
        self.q_proj = blocks.linear(hidden, hidden, None, device, dtype)
        self.k_proj = blocks.linear(hidden, kv, None, device, dtype)
        self.v_proj = blocks.linear(hidden, kv, None, device, dtype)
        self.o_proj = blocks.linear(hidden, hidden, None, device, dtype)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)

        start = 0
        if cache is not None:
            start = cache.length
            cache.k[layer][:, :, start : start + seq] = k
            cache.v[layer][:, :, start : start + seq] = v
            k = cache.k[layer][:, :, : start + seq]
            v = cache.v[layer][:, :, : start + seq]

        mask, causal = None, False
        if start == 0:
            causal = seq > 1  # prefill: the queries and keys are the same positions
        elif seq > 1:
            # A chunk after a filled cache: is_causal would align the triangle to the top left (query i sees keys
            # 0..i), but query i is at position start + i and must see keys 0..start + i.
            q_pos = torch.arange(start, start + seq, device=x.device)
            mask = torch.arange(start + seq, device=x.device)[None, :] <= q_pos[:, None]
        # (A single new token after a filled cache sees every key: no mask.)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=self.num_kv_heads != self.num_heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.num_heads * self.head_dim))


class MLP(nn.Module):
    """down(silu(gate(x)) * up(x)), with gate and up as one projection gate_up whose weight is [gate; up]
    (2 * intermediate, hidden): the layout cuda_kernels.Linear's "swiglu" activation reads."""

    def __init__(self, config: LlamaConfig, blocks: Blocks, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.fused_swiglu = blocks.fused_swiglu
        activation = "swiglu" if self.fused_swiglu else None
        self.gate_up = blocks.linear(config.hidden_size, 2 * config.intermediate_size, activation, device, dtype)
        self.down = blocks.linear(config.intermediate_size, config.hidden_size, None, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused_swiglu:
            return self.down(self.gate_up(x))
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig, blocks: Blocks, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.hidden_size, config.rms_eps, blocks, device, dtype)
        self.attn = Attention(config, blocks, device, dtype)
        self.mlp_norm = RMSNorm(config.hidden_size, config.rms_eps, blocks, device, dtype)
        self.mlp = MLP(config, blocks, device, dtype)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None, layer: int
    ) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    """The decoder. forward(tokens (batch, seq) int64) -> logits (batch, seq, vocab) in the model's dtype."""

    def __init__(self, config: LlamaConfig, blocks: Blocks, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.config = config
        self.kind = blocks.kind
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size, device=device, dtype=dtype)
        self.layers = nn.ModuleList(DecoderLayer(config, blocks, device, dtype) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_eps, blocks, device, dtype)
        self.lm_head = blocks.linear(config.hidden_size, config.vocab_size, None, device, dtype)
        # The rotary tables, computed in float64 and kept in float32 (cast to the activations' dtype per forward);
        # not in the state dict, so that both kinds' state dicts hold only the learned weights.
        inv_freq = config.rope_theta ** -(torch.arange(0, config.head_dim, 2, dtype=torch.float64) / config.head_dim)
        angles = torch.outer(torch.arange(config.max_positions, dtype=torch.float64), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("rope_cos", angles.cos().to(device=device, dtype=torch.float32), persistent=False)
        self.register_buffer("rope_sin", angles.sin().to(device=device, dtype=torch.float32), persistent=False)

    def new_cache(self, batch: int, max_len: int) -> KVCache:
        """An empty KV cache for `batch` sequences of up to max_len positions, on the model's device and dtype."""
        weight = self.embed.weight
        return KVCache(self.config, batch, max_len, weight.device, weight.dtype)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, last_only: bool = False) -> torch.Tensor:
        """tokens (batch, seq) int64 -> logits (batch, seq, vocab), or (batch, 1, vocab) with last_only.

        Without a cache the tokens are positions 0..seq-1. With one they continue it at positions cache.length..,
        their keys and values are stored in it and cache.length advances by seq.
        """
        batch, seq = tokens.shape
        start = 0 if cache is None else cache.length
        if cache is not None and (batch != cache.batch or start + seq > cache.max_len):
            raise ValueError(
                f"{batch} x {seq} tokens at position {start} do not fit the cache ({cache.batch} x {cache.max_len})"
            )
        if start + seq > self.config.max_positions:
            raise ValueError(f"position {start + seq - 1} is past max_positions {self.config.max_positions}")
        x = self.embed(tokens)
        cos = self.rope_cos[start : start + seq].to(x.dtype)
        sin = self.rope_sin[start : start + seq].to(x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache, i)
        if cache is not None:
            cache.length = start + seq
        if last_only:
            x = x[:, -1:]
        return self.lm_head(self.norm(x))


def init_weights(model: nn.Module, seed: int = 0) -> None:
    """Deterministic weights from `seed`: norm weights 1, every other weight normal with std 0.02, drawn in the order
    of the parameter names from a generator on the parameters' device. Both kinds have the same names, so they get
    the same weights on the same device and dtype (a different device draws different numbers)."""
    generators: dict[torch.device, torch.Generator] = {}
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda item: item[0]):
            if name.endswith("norm.weight"):
                p.fill_(1.0)
                continue
            if p.device not in generators:
                generators[p.device] = torch.Generator(device=p.device).manual_seed(seed)
            p.normal_(0.0, 0.02, generator=generators[p.device])


def build_model(
    config: LlamaConfig,
    kind: str = "torch",
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> Llama:
    """A Llama of `config` built from `kind`'s blocks ("torch" or "ours"), its parameters on `device` in `dtype`,
    initialized by init_weights(seed). Raises RuntimeError for "ours" when cuda_kernels lacks what it needs."""
    device = torch.device(device)
    model = Llama(config, blocks_for(kind), device, dtype)
    init_weights(model, seed)
    return model


# ---------------------------------------------------------------------------------------------------------------------
# What the benchmark calls.


def random_tokens(config: LlamaConfig, batch: int, seq: int, seed: int, device: str | torch.device) -> torch.Tensor:
    """(batch, seq) int64 tokens uniform in [0, vocab), drawn on the CPU (the same on every device) and moved."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (batch, seq), generator=g).to(device)


def _median_ms(fn: Callable[[], object], device: torch.device, warmup: int, repeats: int) -> float:
    """Median wall time of fn() in ms: CUDA events around each call on a GPU (synchronized before each, so that a
    call's time includes its own launch overhead and no queue of earlier work), time.perf_counter on the CPU."""
    for _ in range(warmup):
        fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


@torch.no_grad()
def time_prefill(
    model: Llama, batch: int = 8, seq: int = 1024, warmup: int = 3, repeats: int = 10, seed: int = 0
) -> float:
    """Median ms of one forward (no grad, no cache) over (batch, seq) random int64 tokens, giving (batch, seq,
    vocab) logits in the model's dtype on its device. CUDA events on a GPU, time.perf_counter on the CPU."""
    device = model.embed.weight.device
    tokens = random_tokens(model.config, batch, seq, seed, device)
    return _median_ms(lambda: model(tokens), device, warmup, repeats)


@torch.no_grad()
def time_decode_step(
    model: Llama,
    batch: int = 8,
    context: int = 1024,
    warmup: int = 3,
    repeats: int = 20,
    seed: int = 0,
    cuda_graph: bool = False,
) -> float:
    """Median ms of one decoding step: one new token for each of `batch` sequences against a KV cache already
    filled by a prefill of `context` random tokens, giving (batch, 1, vocab) logits. Every timed step sees the same
    context (the cache is rewound to `context` before each), so the steps are alike. No grad.

    An eager step at small batch spends most of its time launching kernels from Python, so its time says more about
    the host cost per op than about the kernels. cuda_graph=True (CUDA only) captures the step once and times its
    replays: the GPU time of the same kernels, without the host."""
    device = model.embed.weight.device
    cache = model.new_cache(batch, context + 1)
    model(random_tokens(model.config, batch, context, seed, device), cache, last_only=True)
    token = random_tokens(model.config, batch, 1, seed + 1, device)

    def step() -> torch.Tensor:
        cache.length = context
        return model(token, cache)

    if not cuda_graph:
        return _median_ms(step, device, warmup, repeats)
    if device.type != "cuda":
        raise ValueError("cuda_graph=True needs a model on a CUDA device")
    # Warm up on a side stream before capturing, as torch.cuda.graphs asks (lazy initialization stays out of the
    # graph). The rewound cache makes every replay write the same slot and read the same context.
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(max(warmup, 1)):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return _median_ms(graph.replay, device, warmup, repeats)


def train_losses(
    model: Llama,
    steps: int = 50,
    batch: int = 8,
    seq: int = 256,
    lr: float = 3e-4,
    seed: int = 0,
    same_batch: bool = False,
) -> list[float]:
    """Trains `model` in place with AdamW (weight decay 0) for `steps` steps of next-token cross entropy (computed in
    float32) on random (batch, seq + 1) token batches, and returns the loss of every step (before its update).

    The batches depend only on `seed` (drawn on the CPU), so two models given the same seed see the same data. With
    same_batch every step uses the first batch: the model memorizes it and the loss falls, where random fresh
    batches would leave it near log(vocab)."""
    device = model.embed.weight.device
    g = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size

    def draw() -> torch.Tensor:
        return torch.randint(0, vocab, (batch, seq + 1), generator=g).to(device)

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    tokens = draw()
    losses = []
    for step in range(steps):
        if step and not same_batch:
            tokens = draw()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def max_logit_diff(a: Llama, b: Llama, batch: int = 2, seq: int = 128, seed: int = 0) -> float:
    """Largest |logit_a - logit_b| over one forward of the same (batch, seq) random tokens, in float32."""
    tokens = random_tokens(a.config, batch, seq, seed, a.embed.weight.device)
    return (a(tokens).float() - b(tokens).float()).abs().max().item()


# ---------------------------------------------------------------------------------------------------------------------
# The command line.


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--dtype", choices=["float32", "bfloat16", "float16"], help="default: bfloat16 on CUDA, else float32"
    )
    p.add_argument("--tiny", action="store_true", help="hidden 64, 2 layers, 4 heads (2 KV), vocab 256, seq 32")
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="the kinds to build and compare")
    p.add_argument("--run", nargs="+", choices=RUNS, default=list(RUNS), help="what to measure")
    for name in ("layers", "hidden", "heads", "kv-heads", "intermediate", "vocab"):
        p.add_argument(f"--{name}", type=int, help="override the config's")
    p.add_argument("--batch", type=int, default=8, help="prefill and decode batch")
    p.add_argument("--seq", type=int, help="prefill length (default 1024, --tiny 32)")
    p.add_argument("--context", type=int, help="decode context (default 1024, --tiny 32)")
    p.add_argument("--cuda-graph", action="store_true", help="time decode steps as CUDA graph replays (no host cost)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10, help="timed calls; the median is reported")
    p.add_argument("--steps", type=int, default=50, help="training steps")
    p.add_argument("--train-batch", type=int, default=8)
    p.add_argument("--train-seq", type=int, help="training length (default 256, --tiny 32)")
    p.add_argument("--lr", type=float, help="AdamW learning rate (default 3e-4, --tiny 3e-3)")
    p.add_argument("--fresh-batches", action="store_true", help="a new random batch every step (default: one batch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the results to PATH")
    args = p.parse_args(argv)
    if args.dtype is None:
        args.dtype = "bfloat16" if torch.device(args.device).type == "cuda" else "float32"
    short = 32 if args.tiny else None
    args.seq = args.seq or short or 1024
    args.context = args.context or short or 1024
    args.train_seq = args.train_seq or short or 256
    if args.lr is None:
        # Steady in bfloat16 too: at 1e-2 the tiny model's bf16 loss already rises on some steps.
        args.lr = 3e-3 if args.tiny else 3e-4
    return args


def config_from_args(args: argparse.Namespace) -> LlamaConfig:
    config = LlamaConfig.tiny() if args.tiny else LlamaConfig()
    overrides = {
        "num_layers": args.layers,
        "hidden_size": args.hidden,
        "num_heads": args.heads,
        "num_kv_heads": args.kv_heads,
        "intermediate_size": args.intermediate,
        "vocab_size": args.vocab,
    }
    config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
    longest = max(args.seq, args.context + 1, args.train_seq)
    if longest > config.max_positions:
        config = dataclasses.replace(config, max_positions=longest)
    return config


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = config_from_args(args)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)

    # Every kind starts from the first one's state dict: the comparison is of the modules, not of the weights.
    models: dict[str, Llama] = {}
    for kind in args.kinds:
        models[kind] = build_model(config, kind, device, dtype, seed=args.seed)
        if len(models) > 1:
            models[kind].load_state_dict(models[args.kinds[0]].state_dict())

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"Llama: {config.num_layers} layers, hidden {config.hidden_size}, {config.num_heads} heads "
        f"({config.num_kv_heads} KV), intermediate {config.intermediate_size}, vocab {config.vocab_size}; "
        f"{device_name}, {args.dtype}, torch {torch.__version__}",
        flush=True,
    )
    results: dict[str, object] = {
        "config": dataclasses.asdict(config),
        "device": device_name,
        "dtype": args.dtype,
        "torch": torch.__version__,
        "args": vars(args),
        "kinds": {kind: {} for kind in models},
    }
    both = "torch" in models and "ours" in models
    if both:
        diff = max_logit_diff(models["torch"], models["ours"], seq=min(128, args.seq), seed=args.seed)
        results["logits_max_abs_diff"] = diff
        print(f"logits, torch vs ours, 2 x {min(128, args.seq)} tokens: max abs diff {diff:.3e}", flush=True)

    def prefill(model: Llama) -> float:
        return time_prefill(model, args.batch, args.seq, args.warmup, args.repeats, args.seed)

    def decode(model: Llama) -> float:
        return time_decode_step(model, args.batch, args.context, args.warmup, args.repeats, args.seed, args.cuda_graph)

    timings = [
        ("prefill", f"batch {args.batch} x {args.seq}", prefill),
        ("decode", f"batch {args.batch}, context {args.context}{', CUDA graph' if args.cuda_graph else ''}", decode),
    ]
    for run, shape, measure in timings:
        if run not in args.run:
            continue
        ms = {kind: measure(model) for kind, model in models.items()}
        for kind, value in ms.items():
            results["kinds"][kind][f"{run}_ms"] = value
        line = f"{run:8s} {shape}: " + "  ".join(f"{kind} {value:.3f} ms" for kind, value in ms.items())
        if both:
            results[f"{run}_ratio_torch_over_ours"] = ms["torch"] / ms["ours"]
            line += f"  torch/ours {ms['torch'] / ms['ours']:.3f}"
        print(line, flush=True)

    if "train" in args.run:
        losses = {
            kind: train_losses(
                model, args.steps, args.train_batch, args.train_seq, args.lr, args.seed, not args.fresh_batches
            )
            for kind, model in models.items()
        }
        for kind, curve in losses.items():
            results["kinds"][kind]["losses"] = curve
        line = f"train    {args.steps} steps of {args.train_batch} x {args.train_seq}, lr {args.lr:g}: " + "  ".join(
            f"{kind} {curve[0]:.4f} -> {curve[-1]:.4f}" for kind, curve in losses.items()
        )
        if both:
            diff = max(abs(a - b) for a, b in zip(losses["torch"], losses["ours"], strict=True))
            results["losses_max_abs_diff"] = diff
            line += f"  max abs diff {diff:.3e}"
        print(line, flush=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
