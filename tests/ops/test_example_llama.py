"""examples/llama.py: the Llama-style decoder with its switch between torch's modules and cuda_kernels'.

On the CPU with the tiny config (seconds): the forward's logits, prefill + decoding through the KV cache against a
full forward, training on a repeated batch, state dicts moving between models, the command line with --json; and the
"ours" kind against the "torch" kind from the same state dict.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest
import torch

import cuda_kernels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "llama.py")
if not os.path.exists(EXAMPLE):  # the tests copied away from a checkout (CI's wheel check under another torch)
    pytest.skip(f"{EXAMPLE} is not here: the example lives in a checkout", allow_module_level=True)


def load_example():
    """examples/ is not a package: the example is imported by path. It is registered in sys.modules before it runs,
    as an import would, since dataclasses look their module up there."""
    name = "examples_llama"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


llama = load_example()
CONFIG = llama.LlamaConfig.tiny()

# (rtol, atol) between two float32 computations of the same logits that differ only in the order of additions.
FLOAT32_TOL = (1e-4, 1e-5)


def tokens(batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    return llama.random_tokens(CONFIG, batch, seq, seed, "cpu")


def test_forward_shape() -> None:
    model = llama.build_model(CONFIG, "torch")
    with torch.no_grad():
        logits = model(tokens(3, 17))
    assert logits.shape == (3, 17, CONFIG.vocab_size)
    assert logits.dtype == torch.float32
    assert torch.isfinite(logits).all()
    # One logit per position: a causal model's first positions do not see the later tokens.
    with torch.no_grad():
        prefix = model(tokens(3, 17)[:, :9])
    torch.testing.assert_close(prefix, logits[:, :9], rtol=FLOAT32_TOL[0], atol=FLOAT32_TOL[1])


def test_same_seed_same_weights() -> None:
    a = llama.build_model(CONFIG, "torch", seed=3).state_dict()
    b = llama.build_model(CONFIG, "torch", seed=3).state_dict()
    c = llama.build_model(CONFIG, "torch", seed=4).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["lm_head.weight"], c["lm_head.weight"])


def test_kv_cache_matches_full_forward() -> None:
    """Prefill 8 tokens into the cache, decode 3 one at a time, then a chunk of 3 (the masked path): each new
    position's logits equal the full forward's over the whole sequence."""
    model = llama.build_model(CONFIG, "torch")
    seq = tokens(2, 14, seed=1)
    with torch.no_grad():
        full = model(seq)
        cache = model.new_cache(2, 14)
        got = [model(seq[:, :8], cache, last_only=True)]
        for i in range(8, 11):
            got.append(model(seq[:, i : i + 1], cache))
        got.append(model(seq[:, 11:14], cache))
    assert cache.length == 14
    torch.testing.assert_close(torch.cat(got, dim=1), full[:, 7:], rtol=FLOAT32_TOL[0], atol=FLOAT32_TOL[1])


def test_decode_past_the_cache_raises() -> None:
    model = llama.build_model(CONFIG, "torch")
    cache = model.new_cache(1, 4)
    with torch.no_grad(), pytest.raises(ValueError, match="do not fit the cache"):
        model(tokens(1, 5), cache)


def test_train_losses_decrease() -> None:
    model = llama.build_model(CONFIG, "torch")
    losses = llama.train_losses(model, steps=20, batch=4, seq=16, lr=1e-2, same_batch=True)
    assert len(losses) == 20
    # Starts near log(vocab) (weights of std 0.02 give nearly uniform logits) and memorizes the batch.
    assert abs(losses[0] - torch.log(torch.tensor(float(CONFIG.vocab_size))).item()) < 0.1
    assert losses[-1] < 0.5 * losses[0], losses
    # The batches depend on the seed alone: a second model from the same weights follows the same curve.
    again = llama.train_losses(llama.build_model(CONFIG, "torch"), steps=5, batch=4, seq=16, lr=1e-2, same_batch=True)
    assert again == losses[:5]


def test_state_dict_loads_into_a_second_model() -> None:
    a = llama.build_model(CONFIG, "torch", seed=0)
    b = llama.build_model(CONFIG, "torch", seed=1)
    state = a.state_dict()
    # The rotary tables are buffers outside the state dict: it holds the learned weights alone.
    assert not any("rope" in name for name in state)
    b.load_state_dict(state)
    x = tokens(2, 9)
    with torch.no_grad():
        assert torch.equal(a(x), b(x))


def test_main_tiny_cpu_json(tmp_path, capsys) -> None:
    out = tmp_path / "llama.json"
    argv = ["--tiny", "--device", "cpu", "--kinds", "torch", "--steps", "3", "--warmup", "1", "--repeats", "2"]
    assert llama.main([*argv, "--batch", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "prefill" in printed and "decode" in printed and "train" in printed
    results = json.loads(out.read_text())
    assert results["dtype"] == "float32" and results["config"]["hidden_size"] == 64
    torch_results = results["kinds"]["torch"]
    assert torch_results["prefill_ms"] > 0 and torch_results["decode_ms"] > 0
    assert len(torch_results["losses"]) == 3


# ---------------------------------------------------------------------------------------------------------------------
# "ours" against "torch"

# Logits: float32 differs only in the order of additions; in bfloat16 ours rounds once where torch rounds each step
# (its SwiGLU rounds gate and up, then silu, then the product), a few bf16 ulps per layer. Compared as the norm of
# the difference relative to the norm of torch's logits.
OURS_LOGITS_REL = {torch.float32: 1e-5, torch.bfloat16: 3e-2}
# Loss curves over 10 steps of memorizing one batch at lr 3e-3. AdamW's updates are sign-like for small gradients, so
# rounding differences can move a weight by up to lr per step; at lr 1e-2 bfloat16 training is already unsteady
# (the loss rises on some steps) and two roundings of the same model part by tenths within 10 steps.
OURS_TRAIN_LR = 3e-3
OURS_LOSS_ATOL = {torch.float32: 1e-3, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_ours_matches_torch(dtype: torch.dtype) -> None:
    reference = llama.build_model(CONFIG, "torch", dtype=dtype, seed=0)
    ours = llama.build_model(CONFIG, "ours", dtype=dtype, seed=1)
    # The same parameter names and shapes: the torch kind's state dict loads strictly.
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in reference.state_dict().items()}
    ours.load_state_dict(reference.state_dict())
    linears = {name: m for name, m in ours.named_modules() if isinstance(m, torch.nn.Linear)}
    assert linears and all(isinstance(m, cuda_kernels.Linear) for m in linears.values())
    assert all(m.activation == ("swiglu" if name.endswith("gate_up") else None) for name, m in linears.items())

    x = tokens(2, 12, seed=2)
    with torch.no_grad():
        want, got = reference(x).float(), ours(x).float()
    assert got.shape == want.shape
    assert ((got - want).norm() / want.norm()).item() < OURS_LOGITS_REL[dtype]

    # Decoding through the cache with ours gives ours' own full-forward logits.
    with torch.no_grad():
        cache = ours.new_cache(2, 12)
        steps = [ours(x[:, :9], cache, last_only=True)] + [ours(x[:, i : i + 1], cache) for i in range(9, 12)]
    decoded = torch.cat(steps, dim=1).float()
    assert ((decoded - got[:, 8:]).norm() / got[:, 8:].norm()).item() < OURS_LOGITS_REL[dtype]

    want_losses = llama.train_losses(reference, steps=10, batch=4, seq=16, lr=OURS_TRAIN_LR, same_batch=True)
    got_losses = llama.train_losses(ours, steps=10, batch=4, seq=16, lr=OURS_TRAIN_LR, same_batch=True)
    assert got_losses[-1] < 0.8 * got_losses[0], got_losses
    diff = max(abs(a - b) for a, b in zip(got_losses, want_losses, strict=True))
    assert diff < OURS_LOSS_ATOL[dtype], (got_losses, want_losses)


def test_main_both_kinds_tiny_cpu(tmp_path) -> None:
    out = tmp_path / "llama.json"
    argv = ["--tiny", "--device", "cpu", "--steps", "5", "--warmup", "1", "--repeats", "2", "--batch", "2"]
    assert llama.main([*argv, "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["logits_max_abs_diff"] < 1e-4
    assert results["losses_max_abs_diff"] < OURS_LOSS_ATOL[torch.float32]
    assert results["prefill_ratio_torch_over_ours"] > 0 and results["decode_ratio_torch_over_ours"] > 0
