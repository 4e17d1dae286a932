"""Tests of the benchmark harness itself (cuda_kernels.tools.bench, run by benchmark.py). They run on the CPU in
seconds."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

import cuda_kernels
from cuda_kernels.tools import testing
from cuda_kernels.tools.bench import cli, env, report, run, table, timing

CPU = ["--device", "cpu", "--no-progress"]

# ---------------------------------------------------------------------------------------------------------
# statistics


def test_median_and_quantiles_on_known_data():
    assert timing.median([3.0, 1.0, 2.0]) == 2.0
    assert timing.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    data = [float(x) for x in range(1, 9)]  # numpy: quantile(1..8, .25) = 2.75, .75 -> 6.25
    assert timing.quantile(data, 0.25) == pytest.approx(2.75)
    assert timing.quantile(data, 0.75) == pytest.approx(6.25)
    assert timing.iqr(data) == pytest.approx(3.5)
    assert timing.quantile([5.0], 0.9) == 5.0
    with pytest.raises(ValueError):
        timing.median([])


def test_stability_rule():
    assert not timing.is_stable([1.0, 1.0, 1.0], 0.01)  # too few samples to judge
    assert timing.is_stable([1.0] * 10, 0.01)
    assert timing.is_stable([1.0, 1.005] * 10, 0.01)
    drifting = [1.0] * 10 + [1.2] * 10  # the last half is 20% slower than the whole
    assert not timing.is_stable(drifting, 0.01)
    assert timing.is_stable(drifting, 0.25)


def test_time_fn_on_cpu_counts_and_scales():
    calls = []
    config = timing.TimingConfig(warmup_ms=1.0, min_reps=5, max_reps=12, max_time_s=0.5, check_every=4)
    result = timing.time_fn(lambda: calls.append(1), "cpu", config)
    assert timing.MIN_SAMPLES <= result.n_reps <= 12
    assert len(calls) >= result.n_reps + 1  # at least one warm-up call
    assert result.median_ms >= 0 and result.iqr_ms >= 0
    per_call = timing.time_fn(lambda: None, "cpu", config, calls_per_sample=1000)
    assert all(s < 1.0 for s in per_call.samples_ms)


def test_median_ci_on_known_data():
    data = [float(x) for x in range(100)]  # ranks j = floor(50 - 9.8) = 40, k = ceil(50 + 9.8) + 1 = 61 (1-based)
    assert timing.median_ci(data) == (39.0, 60.0)
    assert timing.median_ci(list(reversed(data))) == (39.0, 60.0)  # order of the samples does not matter
    assert timing.median_ci_rel(data) == pytest.approx((60 - 39) / 2 / 49.5)
    assert timing.median_ci([5.0, 1.0, 3.0]) == (1.0, 5.0)  # few samples: the whole range, never narrower
    assert timing.median_ci_rel([2.0] * 10) == 0.0
    with pytest.raises(ValueError):
        timing.median_ci([])


def test_median_ci_covers_the_true_median_95_percent_of_the_time():
    """On skewed data (exponential, true median ln 2) the interval must hold the median in about 95% of trials:
    too narrow (z too small, an off-by-one in the ranks) covers less, too wide more."""
    gen = torch.Generator().manual_seed(0)
    trials, n = 2000, 101
    draws = torch.empty(trials, n).exponential_(generator=gen).tolist()
    covered = 0
    for samples in draws:
        lo, hi = timing.median_ci(samples)
        covered += lo <= math.log(2) <= hi
    assert 0.935 <= covered / trials <= 0.975, covered / trials


def noisy_samples(n: int, spread: float, seed: int = 0) -> list[float]:
    """n timings around 4 us whose IQR is about `spread` of the median (a normal sample; IQR = 1.35 sigma)."""
    gen = torch.Generator().manual_seed(seed)
    return (4e-3 * (1 + spread / 1.35 * torch.randn(n, generator=gen, dtype=torch.float64))).tolist()


def test_stop_rule_takes_more_samples_for_noisy_cases():
    config = timing.TimingConfig(min_reps=25, max_reps=5000, max_time_s=1.0, ci_rel_tol=0.005)
    steady, noisy = noisy_samples(25, 0.002), noisy_samples(45, 0.12)
    assert timing.stop_reason(steady, 0.01, config) == "converged"
    # 12% spread: 45 samples know the median to ~+-3%. The old rule (a stable median) stops there; the CI rule
    # wants more.
    assert timing.stop_reason(noisy, 0.01, timing.TimingConfig(ci_rel_tol=None)) == "converged"
    assert timing.median_ci_rel(noisy) > 0.02
    assert timing.stop_reason(noisy, 0.01, config) is None
    # With enough samples (~1.8 IQR / sqrt(n) <= 0.5%: a few thousand) it converges ...
    many = noisy_samples(3000, 0.12)
    assert timing.median_ci_rel(many) <= 0.005
    assert timing.stop_reason(many, 0.5, config) == "converged"
    # ... and the time cap and max_reps bound what a noisy case costs.
    assert timing.stop_reason(noisy, 1.0, config) == "time cap"
    assert timing.stop_reason(noisy_samples(5000, 0.5), 0.1, config) == "max_reps"
    assert timing.stop_reason(noisy[:2], 5.0, config) is None  # MIN_SAMPLES first, even past the time cap


def test_time_fn_samples_a_noisy_case_until_its_median_is_known(monkeypatch):
    """time_fn with the timer replaced by a noisy source (12% spread): the CI rule keeps sampling until the median
    is known to 0.5%; without it, the old rule stops after a few dozen samples."""
    source = iter(noisy_samples(20000, 0.12, seed=1))
    monkeypatch.setattr(timing, "_time_cpu_batch", lambda fn, reps: [next(source) for _ in range(reps)])
    config = timing.TimingConfig(warmup_ms=0.0, min_reps=25, max_reps=10000, max_time_s=60.0, ci_rel_tol=0.005)
    result = timing.time_fn(lambda: None, "cpu", config)
    assert timing.median_ci_rel(result.samples_ms) <= 0.005
    assert 1000 <= result.n_reps < 10000, result.n_reps
    old_rule = timing.time_fn(lambda: None, "cpu", timing.TimingConfig(**{**config.__dict__, "ci_rel_tol": None}))
    assert old_rule.n_reps < 200, old_rule.n_reps


def test_rounds_interleave_the_implementations_and_pool_their_samples(monkeypatch):
    calls = []

    def fake_time_fn(fn, device, config, flush=None, calls_per_sample=1):
        calls.append((fn(), config.warmup_ms, config.ci_rel_tol, config.max_time_s))
        return timing.Timing([float(fn())] * 3, host_bound_batches=1)

    monkeypatch.setattr(timing, "time_fn", fake_time_fn)
    config = timing.TimingConfig(rounds=4)
    a, b, c = timing.time_rounds([lambda: 0, lambda: 1, lambda: 2], "cuda", config)
    assert [x[0] for x in calls] == [0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0]  # forward, backward, ...
    assert [x[1] for x in calls] == [25.0] * 3 + [0.0] * 9  # only the first round warms up by time
    assert {(x[2], x[3]) for x in calls} == {(0.01, 0.25)}  # CI target * sqrt(4), time cap / 4
    assert a.samples_ms == [0.0] * 12 and c.samples_ms == [2.0] * 12 and b.host_bound_batches == 4
    calls.clear()
    assert timing.time_rounds([lambda: 0], "cpu", timing.CPU_TIMING)[0].n_reps == 3 and len(calls) == 1


def test_more_rounds_measure_longer_with_the_same_budget_a_round():
    longer = timing.with_rounds(timing.CUDA_TIMING, 16)
    per, default_per = timing.round_config(longer), timing.round_config(timing.CUDA_TIMING)
    assert longer.rounds == 16 and longer.max_time_s == pytest.approx(4.0)  # 16 rounds of 0.25 s, not 16 of 1/16 s
    assert (per.min_reps, per.max_reps) == (default_per.min_reps, default_per.max_reps)
    assert per.max_time_s == pytest.approx(default_per.max_time_s)
    assert per.ci_rel_tol == pytest.approx(default_per.ci_rel_tol)  # each round stops as a default round does
    assert longer.ci_rel_tol == pytest.approx(0.005 / 2)  # the pooled median known twice as closely
    one = timing.with_rounds(timing.CPU_TIMING, 3)  # from a one-round rule: three rounds of that rule
    assert timing.round_config(one) == dataclasses.replace(timing.CPU_TIMING, rounds=1)
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        timing.with_rounds(timing.CUDA_TIMING, 0)


def test_rounds_option_is_recorded_and_checked(tmp_path, capsys):
    code, data = run_tiny(tmp_path, "--rounds", "3")
    assert code == 0
    settings = data["env"]["settings"]["timing"]
    assert settings["rounds"] == 3 and "3 rounds per case" in settings["rule"]
    assert all(r["n_reps"] >= 3 * timing.MIN_SAMPLES for r in data["records"])  # every round took its samples
    for bad in ("0", "two"):
        with pytest.raises(SystemExit) as exc:
            cli.build_parser().parse_args(["--rounds", bad])
        assert exc.value.code == 2
        assert "--rounds" in capsys.readouterr().err


def test_quick_cuda_runs_interleave_ours_and_torch():
    """make bench's numbers: one round would time the same side first in every case, the other after the clock has
    dropped under the new load; two rounds, the second in reverse order, cancel that drift."""
    assert timing.CUDA_QUICK_TIMING.rounds == 2 and timing.CUDA_QUICK_TIMING.max_time_s == 0.25
    assert timing.round_config(timing.CUDA_QUICK_TIMING).max_time_s == 0.125


def test_timing_settings_say_what_was_done():
    described = timing.describe_timing(timing.CUDA_TIMING)
    assert described["ci_rel_tol"] == 0.005 and described["max_time_s"] == 1.0 and described["ci_z"] == 1.96
    assert "confidence interval of the median" in described["rule"] and "0.50%" in described["rule"]
    assert "confidence" not in timing.describe_timing(timing.CPU_TIMING)["rule"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_batch_redone_when_the_host_falls_behind():
    """A call whose host side (2 ms) outlasts the batch's head start (100 us per call) would starve the GPU, and
    its events would time the host sleep. The batch must be redone with a longer head start, which it outlasts
    no more: the events then see only the (empty) GPU work, far below 2 ms."""
    import time

    samples, starved = timing._time_cuda_batch(lambda: time.sleep(0.002), None, 3)
    assert not starved
    assert timing.median(samples) < 0.5, samples


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_l2_flush_only_reads_its_buffer():
    """The flush before each timed call must read twice the L2, not write it: a written (zeroed) buffer leaves L2
    full of dirty lines whose write-back the timed call then pays for (docs/benchmarks.md)."""
    flush = timing.make_flush_buffer("cuda")
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    assert flush.numel() * flush.element_size() >= 2 * l2_bytes
    flush.fill_(1.0)
    timing._time_cuda_batch(lambda: None, flush, 3)
    torch.cuda.synchronize()
    assert bool((flush == 1.0).all())


def test_host_bound_batches_are_noted_in_the_record():
    case, ours = table.Case("square", torch.float32, (8,)), table.Impl("ours")
    assert report.make_record(case, ours, timing.Timing([1.0]))["note"] == ""
    note = report.make_record(case, ours, timing.Timing([1.0], 2), True, "checked")["note"]
    assert note.startswith("checked; 2 batch(es) host-bound")


# ---------------------------------------------------------------------------------------------------------
# pure helpers: sizes, datasheet, metrics, checks


def test_parse_size():
    assert table.OPS["square"].parse_size("2^24") == (2**24,)
    assert table.OPS["square"].parse_size("1000") == (1000,)
    assert table.OPS["matmul"].parse_size("4096") == (4096, 4096, 4096)
    assert table.OPS["matmul"].parse_size("8192x1024x4096") == (8192, 1024, 4096)  # M x N x K
    for bad, op in [("4x4", "square"), ("0", "square"), ("4x4", "matmul"), ("abc", "matmul")]:
        with pytest.raises(ValueError, match="--size"):
            table.OPS[op].parse_size(bad)
    assert cli.parse_dtypes("fp32,bfloat16") == [torch.float32, torch.bfloat16]
    assert len(cli.parse_dtypes("all")) == 4
    with pytest.raises(ValueError, match="--dtype"):
        cli.parse_dtypes("int8")


def test_datasheet_lookup():
    assert env.lookup_peaks("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert env.lookup_peaks("NVIDIA H200").hbm_tbps == 4.8
    assert env.lookup_peaks("NVIDIA A100-SXM4-80GB").fp32 == 19.5
    assert env.lookup_peaks("NVIDIA L4").bf16 == 121
    assert env.lookup_peaks("NVIDIA GeForce RTX 4090").fp32 == 82.6
    for other in ["NVIDIA H100 PCIe", "NVIDIA L40S", "Tesla T4", "", None]:
        assert env.lookup_peaks(other) is None
    h100 = env.lookup_peaks("NVIDIA H100 80GB HBM3")
    assert env.peak_tflops(h100, torch.float32) == 66.9  # TF32 is off
    assert env.peak_tflops(h100, torch.bfloat16) == 989
    assert env.peak_tflops(h100, torch.float64) is None


def test_metrics_from_records():
    n = 2**20
    case = table.Case("square", torch.float32, (n,))
    copy = report.make_record(case, table.Impl("torch", op="copy"), timing.Timing([1.0]), True)
    ref = report.make_record(case, table.Impl("torch"), timing.Timing([1.5]))
    ours = report.make_record(case, table.Impl("ours"), timing.Timing([2.0]), True)
    mm = table.Case("matmul", torch.bfloat16, (64, 32, 16))
    mm_ref = report.make_record(mm, table.Impl("torch"), timing.Timing([1.0]))
    mm_ours = report.make_record(mm, table.Impl("ours", 0), timing.Timing([4.0]), True)
    records = [copy, ref, ours, mm_ref, mm_ours]
    report.add_metrics(records, env.lookup_peaks("NVIDIA H100 80GB HBM3"))

    assert copy["op"] == "copy" and copy["impl"] == "torch" and copy["pct_roofline"] == pytest.approx(100)
    assert ours["gbps"] == pytest.approx(2 * n * 4 / 2e-3 / 1e9)
    assert ours["tflops"] is None
    assert ours["pct_roofline"] == pytest.approx(50.0)
    assert ours["speedup"] == pytest.approx(0.75)
    assert ours["pct_peak"] == pytest.approx(100 * ours["gbps"] / 3350)
    assert mm_ours["tflops"] == pytest.approx(2 * 64 * 32 * 16 / 4e-3 / 1e12)
    assert mm_ours["gbps"] == pytest.approx((64 * 16 + 16 * 32 + 64 * 32) * 2 / 4e-3 / 1e9)
    assert mm_ours["pct_roofline"] == pytest.approx(25.0)
    assert mm_ours["speedup"] == pytest.approx(0.25)
    assert mm_ours["pct_peak"] == pytest.approx(100 * mm_ours["tflops"] / 989)


def check(op: str, inputs: list[torch.Tensor], out: torch.Tensor, math: str | None = None) -> tuple[bool | None, str]:
    return table.OPS[op].check(inputs, out, math)


def assert_checks_catch_wrong_results() -> None:
    """The table's checks on outputs that are wrong by construction, whatever the data: it must say so."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=gen).bfloat16()
    assert check("square", [x], x.float().square().bfloat16()) == (True, "")
    wrong = x.float().square().bfloat16()
    wrong[7] = -wrong[7] - 1  # a square is never negative
    ok, note = check("square", [x], wrong)
    assert ok is False and "1 of 1000" in note and "first at 7" in note, note

    m, k, n = 33, 65, 17
    a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
    assert check("matmul", [a, b], a @ b)[0] is True
    # The checker's bound (cuda_kernels/tools/testing.py) at (i, j) is u |ref| + tiny + (1 + u) min(K, 6 sqrt K) u S
    # with S = (|a| @ |b|)[i, j] >= |ref|, so at most (u + (1 + u) min(K, 6 sqrt K) u) S + tiny, 3e-6 S for K = 65; and
    # a @ b in float32 is within K u S (4e-6 S) of the exact product. Moving one element by 1e-3 S puts it more than
    # 100 bounds away for any data (a relative change, as this test once made, is lost where |ref| << S).
    u = 2.0**-24
    s = float((a.abs() @ b.abs())[3, 4])
    max_bound = (u + (1 + u) * testing.accumulation_factor(k) * u) * s + torch.finfo(torch.float32).tiny
    off = a @ b
    off[3, 4] += 1e-3 * s
    assert 1e-3 * s - k * u * s > 100 * max_bound
    ok, note = check("matmul", [a, b], off)
    assert ok is False and "1 of 561" in note and "(3, 4)" in note, note
    nan = a @ b
    nan[0, 0] = float("nan")
    assert check("matmul", [a, b], nan)[0] is False


def test_checks_detect_wrong_results():
    assert_checks_catch_wrong_results()


@pytest.mark.parametrize("blind", ["square", "matmul"])
def test_wrong_result_test_fails_with_a_blind_checker(monkeypatch, blind):
    """The test above can fail: with a checker that accepts anything, it does."""
    if blind == "square":
        monkeypatch.setattr(table, "check_equal", lambda out, ref: (True, ""))
    else:
        monkeypatch.setattr(testing, "matmul_error_bound", lambda a, b, ref: torch.full_like(ref, float("inf")))
    with pytest.raises(AssertionError):
        assert_checks_catch_wrong_results()


def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """float32 -> the nearest TF32 value (10 explicit mantissa bits, ties to even), still as float32."""
    bits = x.view(torch.int32)
    rounded = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~0x1FFF
    return rounded.view(torch.float32)


def test_tf32_check_accepts_tf32_results_only_with_the_tf32_bound():
    """A result computed from TF32-rounded inputs (what cuBLAS TF32 does) is out of the float32 bound but within the
    TF32 one; an error of 1e-2 S is out of both; and math "tf32" is what selects the TF32 bound."""
    gen = torch.Generator().manual_seed(0)
    m, k, n = 64, 512, 48
    a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
    assert tf32_round(torch.tensor([1 + 2.0**-12, 1 + 3 * 2.0**-12])).tolist() == [1.0, 1 + 2.0**-10]  # ties to even
    tf32_like = (tf32_round(a).double() @ tf32_round(b).double()).float()
    assert check("matmul", [a, b], tf32_like)[0] is False  # the float32 bound is not loosened
    assert check("matmul", [a, b], tf32_like, "tf32") == (True, "")
    assert check("matmul", [a, b], a @ b, "tf32") == (True, "")
    s = float((a.abs() @ b.abs())[5, 6])
    off = tf32_like.clone()
    off[5, 6] += 1e-2 * s  # ten times the TF32 bound (about 1e-3 S)
    ok, note = check("matmul", [a, b], off, "tf32")
    assert ok is False and "(5, 6)" in note, note
    with pytest.raises(ValueError, match="float32"):
        testing.tf32_matmul_error_bound(a.double(), b.double(), a.double() @ b.double())


def test_nvtx_paths_name_the_case():
    assert table.Case("square", torch.float32, (2**24,)).nvtx_path == ["square", "float32", "16777216"]
    case = table.Case("matmul", torch.bfloat16, (4096, 4096, 4096))
    assert "/".join(case.nvtx_path) == "matmul/bfloat16/4096x4096x4096"


def test_default_cpu_sweep_is_capped():
    args = cli.build_parser().parse_args([])
    cases = cli.select_cases(args, torch.device("cpu"))
    assert {c.dtype for c in cases} == set(table.DTYPES.values())
    assert max(c.shape[0] for c in cases if c.op == "square") == table.CPU_MAX_ELEMENTS
    assert all(math.prod(c.shape) <= table.CPU_MAX_MATMUL_MACS for c in cases if c.op == "matmul")
    gpu_cases = cli.select_cases(args, torch.device("cuda"))
    assert max(c.shape[0] for c in gpu_cases if c.op == "square") == 2**28
    assert (8192, 1024, 4096) in {c.shape for c in gpu_cases}


def _parsed(op: table.BenchOp, sizes: list[str]) -> list[table.Shape]:
    """The sizes op's parse_size reads, as shapes."""
    shapes = []
    for text in sizes:
        try:
            shapes.append(op.parse_size(text))
        except ValueError:
            pass
    return shapes


def test_sizes_apply_to_the_ops_they_fit():
    """--op all: each size goes to the ops it fits, square and matmul as written here, and every other op of the table
    (those python -m cuda_kernels.new adds) to the sizes its parse_size reads."""
    sizes = ["2^24", "4096", "512x256x128"]
    args = cli.build_parser().parse_args(["--size", ",".join(sizes), "--dtype", "float32"])
    shapes = {(c.op, c.shape) for c in cli.select_cases(args, torch.device("cpu"))}
    examples = {"square", "matmul"}
    assert {(op, shape) for op, shape in shapes if op in examples} == {
        ("square", (2**24,)),
        ("square", (4096,)),
        ("matmul", (4096,) * 3),
        ("matmul", (512, 256, 128)),
    }
    others = [op for op in table.OPS_IN_ORDER if op.in_all and op.name not in examples]
    assert {(op, shape) for op, shape in shapes if op not in examples} == {
        (op.name, shape) for op in others for shape in _parsed(op, sizes)
    }
    args = cli.build_parser().parse_args(["-i", "1", "--op", "square"])
    assert [(c.op, c.dtype, c.shape) for c in cli.select_cases(args, torch.device("cuda"))] == [
        ("square", torch.float32, (2**24,))
    ]


# ---------------------------------------------------------------------------------------------------------
# end to end on the CPU: JSON, CSV, plot, compare, wrong results, -i


def run_tiny(tmp_path: Path, *extra: str, name: str = "run") -> tuple[int, dict]:
    """A real, tiny CPU run of square 2^12 float32; returns (exit code, the JSON it wrote)."""
    out = tmp_path / f"{name}.json"
    code = cli.main(
        ["--op", "square", "--size", "2^12", "--dtype", "float32", "--quick", "--json", str(out), *CPU, *extra]
    )
    return code, json.loads(out.read_text())


def test_json_schema_of_a_real_run(tmp_path, capsys):
    code, data = run_tiny(tmp_path, "--csv", str(tmp_path / "run.csv"))
    assert code == 0
    assert "ours/torch" in capsys.readouterr().out  # the table was printed
    env_json = data["env"]
    for key in [
        "gpu",
        "sm_clock_mhz",
        "sm_clock_max_mhz",
        "driver",
        "cuda",
        "torch",
        "git_commit",
        "git_dirty",
        "build_info",
        "host",
        "date",
        "settings",
    ]:
        assert key in env_json, key
    assert env_json["device"] == "cpu" and env_json["settings"]["method"] == "wall-clock"
    assert env_json["git_commit"]  # a commit hash or "unknown"

    records = data["records"]
    assert [(r["op"], r["impl"]) for r in records] == [("copy", "torch"), ("square", "torch"), ("square", "ours")]
    for r in records:
        assert set(report.RECORD_FIELDS) <= set(r)
        assert r["dtype"] == "float32" and r["shape"] == [4096]
        assert r["median_ms"] > 0 and r["iqr_ms"] >= 0 and r["n_reps"] >= timing.MIN_SAMPLES
        assert r["gbps"] > 0 and r["tflops"] is None and r["pct_roofline"] > 0
    copy, _, ours = records
    assert ours["correct"] is True and ours["speedup"] > 0
    assert ours["pct_roofline"] == pytest.approx(100 * ours["gbps"] / copy["gbps"])

    with open(tmp_path / "run.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(records) and list(rows[0]) == report.RECORD_FIELDS
    assert rows[2]["shape"] == "4096" and float(rows[2]["median_ms"]) == pytest.approx(ours["median_ms"])


def test_matmul_run_records_mnk(tmp_path, capsys):
    out = tmp_path / "mm.json"
    code = cli.main(
        ["--op", "matmul", "--size", "48x40x24", "--dtype", "bfloat16", "--quick", "--json", str(out), *CPU]
    )
    assert code == 0
    assert "48x40x24" in capsys.readouterr().out  # the table, kept out of the test run's output
    records = json.loads(out.read_text())["records"]
    assert [r["impl"] for r in records] == ["torch", "ours"]
    for r in records:
        assert r["op"] == "matmul" and r["shape"] == [48, 40, 24] and r["tflops"] > 0
    assert records[1]["variant"] == 0 and records[1]["correct"] is True


def test_compare_exit_code(tmp_path, capsys):
    code, data = run_tiny(tmp_path, name="base")
    assert code == 0

    def write_scaled(factor: float, name: str) -> Path:
        path = tmp_path / name
        scaled = [{**r, "median_ms": r["median_ms"] * factor} for r in data["records"]]
        path.write_text(json.dumps({"env": data["env"], "records": scaled}))
        return path

    # An old run 100x faster: every case is now far slower than the 10% threshold.
    assert run_tiny(tmp_path, "--compare", str(write_scaled(0.01, "fast.json")))[0] == 3
    assert "SLOWER" in capsys.readouterr().out
    # An old run 100x slower: nothing regressed.
    assert run_tiny(tmp_path, "--compare", str(write_scaled(100, "slow.json")))[0] == 0
    assert "SLOWER" not in capsys.readouterr().out

    # The pure function: the same times are no change; the threshold is respected.
    same, slower = report.compare_records(data["records"], data["records"], 0.10)
    assert not slower and len(same) == 3 and all(row["change"] == 0 for row in same)
    worse = [{**r, "median_ms": r["median_ms"] * 1.05} for r in data["records"]]
    assert report.compare_records(data["records"], worse, 0.10)[1] is False
    assert report.compare_records(data["records"], worse, 0.01)[1] is True


def test_plot_is_written(tmp_path, capsys):
    code, data = run_tiny(tmp_path, "--plot", str(tmp_path / "run.png"))
    assert code == 0
    assert "ours/torch" in capsys.readouterr().out  # the table, kept out of the test run's output
    png = (tmp_path / "run.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 1000
    # Matmul panels (with a datasheet line) from records alone.
    mm = table.Case("matmul", torch.float16, (256, 256, 256))
    records = [report.make_record(mm, table.Impl(i), timing.Timing([1.0])) for i in ("torch", "ours")]
    report.add_metrics(records, None)
    report.plot_records(records + data["records"], tmp_path / "mm.png", env.lookup_peaks("NVIDIA L4"))
    assert (tmp_path / "mm.png").read_bytes().startswith(b"\x89PNG")


def test_wrong_square_is_reported_without_speed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cuda_kernels, "square", lambda x: torch.square(x) + 1)
    code, data = run_tiny(tmp_path)
    assert code == 1
    ours = [r for r in data["records"] if r["impl"] == "ours"]
    assert len(ours) == 1 and ours[0]["correct"] is False
    assert all(ours[0][k] is None for k in ["median_ms", "iqr_ms", "gbps", "pct_roofline", "speedup"])
    out = capsys.readouterr().out
    assert "WRONG RESULT" in out and "4096 of 4096 elements differ" in out
    # The references are still timed.
    assert all(r["median_ms"] for r in data["records"] if r["impl"] == "torch")


def test_wrong_or_raising_matmul_fails_the_run(tmp_path, monkeypatch, capsys):
    """Planted wrong and raising matmuls; capsys keeps their reports out of the test run's output."""
    args = ["--op", "matmul", "--size", "32", "--dtype", "float32", "--quick", *CPU]
    monkeypatch.setattr(cuda_kernels, "matmul", lambda a, b, variant=0: torch.mm(a, b) * (1 + 1e-4))
    assert cli.main(args) == 1
    assert "matmul float32 32x32x32 ours: " in capsys.readouterr().out

    def broken(a, b, variant=0):
        raise RuntimeError("cuda_kernels.matmul: boom")

    monkeypatch.setattr(cuda_kernels, "matmul", broken)
    out = tmp_path / "r.json"
    assert cli.main([*args, "--json", str(out)]) == 1
    ours = json.loads(out.read_text())["records"][-1]
    assert ours["correct"] is False and "boom" in ours["note"] and ours["median_ms"] is None
    assert "raised RuntimeError: cuda_kernels.matmul: boom" in capsys.readouterr().out


class CallCounter:
    """Stands in for an op: counts calls and remembers the inputs' shapes."""

    def __init__(self, fn):
        self.fn = fn
        self.shapes = []

    def __call__(self, *args, **kwargs):
        self.shapes.append(tuple(tuple(a.shape) for a in args))
        return self.fn(*args, **kwargs)


def test_iters_runs_exactly_n_calls_and_nothing_else(monkeypatch, capsys):
    ours = CallCounter(torch.square)
    reference = CallCounter(torch.square)
    monkeypatch.setattr(cuda_kernels, "square", ours)
    monkeypatch.setattr(torch, "square", reference)
    assert cli.main(["--op", "square", "--size", "2^10", "-i", "3", *CPU]) == 0
    assert ours.shapes == [((1024,),)] * 3
    assert reference.shapes == []  # no reference, no check, no warm-up
    assert "median" not in capsys.readouterr().out  # no table


def test_iters_without_op_runs_one_representative_case_per_op(monkeypatch, capsys):
    square = CallCounter(lambda x: x)
    matmul = CallCounter(lambda a, b, variant=0: a[:, :1])
    monkeypatch.setattr(cuda_kernels, "square", square)
    monkeypatch.setattr(cuda_kernels, "matmul", matmul)
    assert cli.main(["-i", "1", *CPU]) == 0
    assert square.shapes == [((2**24,),)]
    m, n, k = table.ITERS_CPU_MATMUL_SHAPE  # 4096 on CUDA; the CPU kernel is slow
    assert matmul.shapes == [((m, k), (k, n))]
    assert "ran 1 call(s) of ours matmul" in capsys.readouterr().out


def test_bad_arguments_exit_2(capsys):
    assert cli.main(["--op", "square", "--size", "4x4", *CPU]) == 2
    assert cli.main(["--dtype", "int8", *CPU]) == 2
    if not (torch.cuda.is_available() and cuda_kernels.build_info()["cuda"]):
        assert cli.main(["--device", "cuda", "--no-progress"]) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize("allow", [None, "1"])
def test_cpu_only_build_on_a_gpu_host_is_said_on_the_first_line(monkeypatch, capsys, allow):
    """A GPU host that loaded a CPU-only build (faked here) times the CPU kernels: the first line says so."""
    real_build_info = cuda_kernels.build_info
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda_kernels, "build_info", lambda: {**real_build_info(), "cuda": False})
    if allow is None:
        monkeypatch.delenv(cli.ALLOW_CPU_ONLY_ENV, raising=False)
    else:
        monkeypatch.setenv(cli.ALLOW_CPU_ONLY_ENV, allow)
    assert cli.main(["--op", "square", "--size", "2^10", "-i", "1", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    if allow is None:
        assert lines[0].startswith("WARNING: a CUDA device is visible but the extension was built without CUDA")
        assert f"{cli.ALLOW_CPU_ONLY_ENV}=1" in lines[0]
    else:
        assert lines[0].startswith("note: CPU-only build on a host with a CUDA device")
    assert lines[1] == "ran 1 call(s) of ours square float32 1024"  # the CPU was used


def test_no_cpu_only_notice_where_it_does_not_apply(monkeypatch):
    real_build_info = cuda_kernels.build_info
    for gpu, cuda in [(False, False), (False, True), (True, True)]:
        monkeypatch.setattr(torch.cuda, "is_available", lambda gpu=gpu: gpu)
        monkeypatch.setattr(cuda_kernels, "build_info", lambda cuda=cuda: {**real_build_info(), "cuda": cuda})
        assert cli.cpu_only_build_notice() == "", (gpu, cuda)


# ---------------------------------------------------------------------------------------------------------
# matmul ladder steps per dtype and device, the default sweep's tensor-core rows, TF32 (a fake ladder on the CPU)

ALL_DTYPES = {"float32", "float64", "float16", "bfloat16"}
FAKE_LADDER = [(v, name) for v, name in enumerate(["01_tiled", "02_blocktile_2d", "03_vectorized", "04_double_buffer",
               "05_warptile", "06_async_pipeline", "07_mma_sync", "08_mma_pipeline", "09_wgmma_tma"], start=1)]  # fmt: skip
FAKE_DTYPES = {v: (ALL_DTYPES if v <= 6 else {"float16", "bfloat16"}) for v, _ in FAKE_LADDER}
NEEDS_HOPPER = "needs an sm_90a build on a compute-9.0 GPU (this binary was built for sm_80)"


def fake_unmet_need(variant: int, dtype_name: str, device: torch.device, tf32: bool = False) -> str:
    """As csrc/checks.h words it, for a binary built for sm_80 on an sm_80 GPU: step 9 never runs here."""
    if dtype_name not in FAKE_DTYPES[variant]:
        return f"supports float16 and bfloat16, got {dtype_name}"
    return NEEDS_HOPPER if variant == 9 else ""


@pytest.fixture
def fake_ladder(monkeypatch):
    """The ladder of an sm_80 build with tensor-core steps, on whatever device the test names; the op raises for a
    step that cannot run, as the real one does."""
    monkeypatch.setattr(table, "matmul_ladder_on", lambda device: FAKE_LADDER)
    monkeypatch.setattr(table, "matmul_step_dtypes", lambda: FAKE_DTYPES)
    monkeypatch.setattr(table, "matmul_step_unmet_need", fake_unmet_need)

    def matmul(a, b, variant=0):
        why = fake_unmet_need(variant, str(a.dtype).removeprefix("torch."), a.device) if variant else ""
        if why:
            raise RuntimeError(f"cuda_kernels.matmul: variant {variant} ({dict(FAKE_LADDER)[variant]}) {why}")
        return torch.mm(a, b)

    monkeypatch.setattr(cuda_kernels, "matmul", matmul)


def planned(by_case: dict, dtype: torch.dtype, shape: tuple, math_mode: str | None = None) -> list[int]:
    return [impl.variant for impl in by_case[table.Case("matmul", dtype, shape, math_mode)]]


def test_tensor_core_steps_are_the_16_bit_only_steps():
    assert table.tensor_core_steps(FAKE_LADDER, FAKE_DTYPES) == FAKE_LADDER[6:]
    assert table.tensor_core_steps(FAKE_LADDER[:6], FAKE_DTYPES) == []  # the SIMT ladder has none
    assert table.tensor_core_steps(FAKE_LADDER, {}) == []  # a build that cannot say


def test_default_cuda_sweep_adds_the_tensor_core_steps_that_run_here(fake_ladder):
    cuda = torch.device("cuda")
    cases = cli.select_cases(cli.build_parser().parse_args([]), cuda)
    by_case, skipped = table.plan_matmul(cases, [table.Impl("ours", 0)], cuda, True)
    for dtype in (torch.bfloat16, torch.float16):
        for n in (4096, 8192):
            assert planned(by_case, dtype, (n,) * 3) == [0, 7, 8]  # step 9 cannot run on this (fake) GPU
        assert planned(by_case, dtype, (2048,) * 3) == [0]
    # At 4096^3 every CUDA-core step in float32 (the fake ladder has no float32- or float64-only kernel).
    assert planned(by_case, torch.float32, (4096,) * 3) == [0, 1, 2, 3, 4, 5, 6]
    assert planned(by_case, torch.float32, (8192,) * 3) == [0]
    assert planned(by_case, torch.float32, (4096,) * 3, "tf32") == [0]
    assert planned(by_case, torch.float64, (4096,) * 3) == [0]
    assert planned(by_case, torch.float64, (8192,) * 3) == [0]
    # One note per step and dtype, not per case.
    assert sorted((s.variant, s.dtype) for s in skipped) == [(9, "bfloat16"), (9, "float16")]
    assert skipped[0].note == f"note: matmul step 9 (09_wgmma_tma) skipped for {skipped[0].dtype}: {NEEDS_HOPPER}"
    # Steps 7 and 8 carry their names (the ladder table and check_targets read variant_name).
    impls = by_case[table.Case("matmul", torch.bfloat16, (4096,) * 3)]
    assert [i.variant_name for i in impls] == [None, "07_mma_sync", "08_mma_pipeline"]
    # Not in a sweep with --size (no extra shapes), nor on the CPU (no ladder there).
    by_case, _ = table.plan_matmul(cases, [table.Impl("ours", 0)], cuda, False)
    assert planned(by_case, torch.bfloat16, (4096,) * 3) == [0]


def test_own_dtype_kernels_are_the_rungs_or_the_special_case_of_the_dtype():
    ladder = [*FAKE_LADDER, (13, "tf32_wgmma"), (14, "matvec"), (15, "fp64_dmma")]
    dtypes = {**FAKE_DTYPES, 13: {"float32"}, 14: ALL_DTYPES, 15: {"float64"}}
    assert [v for v, _ in table.own_dtype_kernels(ladder, dtypes, "float32", None)] == [1, 2, 3, 4, 5, 6]
    assert table.own_dtype_kernels(ladder, dtypes, "float32", "tf32") == [(13, "tf32_wgmma")]
    assert table.own_dtype_kernels(ladder, dtypes, "float64", None) == [(15, "fp64_dmma")]
    assert table.own_dtype_kernels(ladder, dtypes, "bfloat16", None) == []  # the tensor-core steps cover it


def test_ladder_skips_per_dtype_what_cannot_run(fake_ladder):
    cuda = torch.device("cuda")
    args = cli.build_parser().parse_args(["--op", "matmul", "--ladder", "--size", "4096"])
    cases = cli.select_cases(args, cuda)
    ours = cli.select_ours(args, cuda)
    assert [i.variant for i in ours] == list(range(1, 10))
    by_case, skipped = table.plan_matmul(cases, ours, cuda, False)
    assert planned(by_case, torch.float32, (4096,) * 3) == [1, 2, 3, 4, 5, 6]
    assert planned(by_case, torch.float64, (4096,) * 3) == [1, 2, 3, 4, 5, 6]
    assert planned(by_case, torch.bfloat16, (4096,) * 3) == [1, 2, 3, 4, 5, 6, 7, 8]
    expected = [(v, d) for d in ("float32", "float64") for v in (7, 8, 9)] + [(9, "float16"), (9, "bfloat16")]
    assert sorted((s.variant, s.dtype) for s in skipped) == sorted(expected)
    # A forced step: the same rule (variant 0 and a variant the ladder does not know are never left out).
    for variant, kept in [(7, [7]), (0, [0]), (42, [42])]:
        by_case, _ = table.plan_matmul(cases, [table.Impl("ours", variant)], cuda, False)
        assert planned(by_case, torch.bfloat16, (4096,) * 3) == kept
    by_case, _ = table.plan_matmul(cases, [table.Impl("ours", 7)], cuda, False)
    assert planned(by_case, torch.float32, (4096,) * 3) == []


def run_fake_ladder(tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "ladder.json"
    code = cli.main(
        ["--op", "matmul", "--ladder", "--size", "40x24x32", "--dtype", "float32,bfloat16", "--quick", "--json",
         str(out), *CPU]
    )  # fmt: skip
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_ladder_run_skips_with_a_note_and_exits_0(fake_ladder, tmp_path, capsys):
    code, data = run_fake_ladder(tmp_path)
    assert code == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: matmul step")]
    assert notes == [
        "note: matmul step 7 (07_mma_sync) skipped for float32: supports float16 and bfloat16, got float32",
        "note: matmul step 8 (08_mma_pipeline) skipped for float32: supports float16 and bfloat16, got float32",
        "note: matmul step 9 (09_wgmma_tma) skipped for float32: supports float16 and bfloat16, got float32",
        f"note: matmul step 9 (09_wgmma_tma) skipped for bfloat16: {NEEDS_HOPPER}",
    ]
    rows = [(r["dtype"], r["variant"]) for r in data["records"] if r["impl"] == "ours"]
    assert rows == [("float32", v) for v in range(1, 7)] + [("bfloat16", v) for v in range(1, 9)]
    assert all(r["correct"] is True for r in data["records"] if r["impl"] == "ours")
    skipped = data["env"]["settings"]["skipped"]
    assert [(s["variant"], s["dtype"]) for s in skipped] == [
        (7, "float32"),
        (8, "float32"),
        (9, "float32"),
        (9, "bfloat16"),
    ]


def test_ladder_run_without_the_skip_rule_fails(fake_ladder, monkeypatch, tmp_path, capsys):
    """The test above can fail: if nothing is left out, the steps that cannot run raise and the run exits 1."""
    monkeypatch.setattr(table, "matmul_step_unmet_need", lambda variant, dtype_name, device, tf32=False: "")
    assert run_fake_ladder(tmp_path)[0] == 1
    assert "4 case(s) gave a WRONG RESULT" in capsys.readouterr().out


def test_tf32_cases_in_the_sweep():
    def cases(*argv: str, device: str = "cuda") -> list:
        args = cli.build_parser().parse_args(list(argv))
        return [(c.dtype, c.shape, c.math) for c in cli.select_cases(args, torch.device(device)) if c.op == "matmul"]

    full = cases()
    tf32 = [c for c in full if c[2] == "tf32"]
    assert tf32 == [(torch.float32, (4096,) * 3, "tf32")]  # one extra case beside the TF32-off ones
    assert len(full) == 4 * len(table.MATMUL_SHAPES) + 1
    assert [c for c in cases("--quick") if c[2]] == tf32
    assert not [c for c in cases(device="cpu") if c[2]]  # TF32 is a CUDA setting
    assert not [c for c in cases("--size", "4096") if c[2]]  # --size: exactly the cases asked for
    # --tf32: every float32 matmul case with TF32 allowed, no TF32-off float32 case.
    forced = cases("--tf32", "--dtype", "float32,bfloat16")
    assert {c[2] for c in forced if c[0] == torch.float32} == {"tf32"}
    assert {c[2] for c in forced if c[0] == torch.bfloat16} == {None}
    assert len(forced) == 2 * len(table.MATMUL_SHAPES)
    assert table.Case("matmul", torch.float32, (8, 8, 8), "tf32").nvtx_path == ["matmul", "float32+tf32", "8x8x8"]


def test_tf32_case_allows_tf32_for_both_sides_and_restores_it(monkeypatch):
    seen = []

    def ours(a, b, variant=0):
        seen.append(("ours", torch.backends.cuda.matmul.allow_tf32))
        return a @ b

    real_mm = torch.mm

    def reference(a, b):
        seen.append(("torch", torch.backends.cuda.matmul.allow_tf32))
        return real_mm(a, b)

    monkeypatch.setattr(cuda_kernels, "matmul", ours)
    monkeypatch.setattr(torch, "mm", reference)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    settings = run.RunSettings(torch.device("cpu"), timing.CPU_QUICK_TIMING)
    tf32 = run.run_case(table.Case("matmul", torch.float32, (16, 8, 32), "tf32"), settings)
    assert {s for s in seen} == {("ours", True), ("torch", True)}
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert [(r["impl"], r["math"], r["correct"]) for r in tf32] == [("torch", "tf32", None), ("ours", "tf32", True)]
    seen.clear()
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)  # a user's setting does not leak in
    run.run_case(table.Case("matmul", torch.float32, (16, 8, 32)), settings)
    assert {s for s in seen} == {("ours", False), ("torch", False)}
    assert torch.backends.cuda.matmul.allow_tf32 is True


def test_tf32_rows_are_their_own_cases_in_metrics_compare_and_table():
    shape = (4096, 4096, 4096)
    fp32, tf32 = table.Case("matmul", torch.float32, shape), table.Case("matmul", torch.float32, shape, "tf32")
    rows = [
        report.make_record(fp32, table.Impl("torch"), timing.Timing([2.0])),
        report.make_record(fp32, table.Impl("ours", 0), timing.Timing([2.5]), True),
        report.make_record(tf32, table.Impl("torch"), timing.Timing([0.5])),
        report.make_record(tf32, table.Impl("ours", 0), timing.Timing([2.5]), True),
    ]
    report.add_metrics(rows, env.lookup_peaks("NVIDIA H100 80GB HBM3"))
    assert [r["math"] for r in rows] == [None, None, "tf32", "tf32"]
    assert rows[1]["speedup"] == pytest.approx(0.8) and rows[3]["speedup"] == pytest.approx(0.2)  # vs cuBLAS TF32
    assert rows[3]["pct_roofline"] == pytest.approx(20.0)
    assert rows[2]["pct_peak"] == pytest.approx(100 * rows[2]["tflops"] / 495)  # the TF32 datasheet peak
    assert rows[0]["pct_peak"] == pytest.approx(100 * rows[0]["tflops"] / 66.9)
    # An old JSON (no math field) matches the TF32-off rows only.
    old = [{k: v for k, v in r.items() if k != "math"} for r in rows[:2]]
    compared, _ = report.compare_records(old, rows, 0.10)
    assert [row["key"][-1] for row in compared] == [None, None]
    assert "float32+tf32" in report.format_table(rows)


def test_failing_torch_compile_is_noted_not_failed(tmp_path, monkeypatch, capsys):
    """torch.compile's row is torch's: an inductor failure on a case (as on the float64 rms_norm backward, torch
    2.11) is shown as such and noted, and the run exits 0 when our rows are right."""
    plain = run.case_impls

    def with_compile(case, settings):  # the CUDA-only compile row, on the CPU here
        impls = plain(case, settings)
        return [*impls[:-1], table.Impl("torch.compile"), impls[-1]]

    def broken_compile(inputs):
        def call():
            raise RuntimeError("InductorError: boom")

        return call

    monkeypatch.setattr(run, "case_impls", with_compile)
    monkeypatch.setitem(table.OPS, "rms_norm", dataclasses.replace(table.OPS["rms_norm"], compiled=broken_compile))
    out = tmp_path / "r.json"
    args = ["--op", "rms_norm", "--size", "64x256", "--dtype", "float32", "--quick", "--json", str(out), *CPU]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "FAILED (torch's)" in printed and "torch.compile failed, not timed: raised RuntimeError" in printed
    rows = {r["impl"]: r for r in json.loads(out.read_text())["records"] if r["op"] == "rms_norm"}
    assert rows["torch.compile"]["correct"] is False and rows["ours"]["correct"] is True


def test_llama_prefill_times_the_example_on_the_cpu(tmp_path):
    """--op llama_prefill: examples/llama.py's tiny decoder, torch's layers against ours from one state dict, checked
    (logits) and timed; not part of --op all."""
    out = tmp_path / "llama.json"
    code = cli.main(["--op", "llama_prefill", "--dtype", "float32", "--quick", "--json", str(out), *CPU])
    records = json.loads(out.read_text())["records"]
    assert code == 0
    assert {(r["impl"], tuple(r["shape"])) for r in records} == {("torch", (2, 32)), ("ours", (2, 32))}
    ours = next(r for r in records if r["impl"] == "ours")
    assert ours["correct"] is True and ours["speedup"] > 0
    assert "llama_prefill" not in {
        c.op for c in cli.select_cases(cli.build_parser().parse_args([]), torch.device("cpu"))
    }
