"""What produced the numbers: datasheet peaks of known GPUs, clocks, versions, git commit, build, host, date."""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

import cuda_kernels

# Where git is asked for the commit: the checkout the package was imported from.
PACKAGE_ROOT = Path(cuda_kernels.__file__).resolve().parent.parent


@dataclass(frozen=True)
class Peaks:
    """Datasheet peaks of one GPU: dense TFLOP/s per math mode and HBM bandwidth in TB/s (None: not listed)."""

    name: str
    fp32: float
    bf16: float
    fp16: float
    hbm_tbps: float
    tf32: float | None = None


# Matched against torch.cuda.get_device_name(): every `match` substring present, no `exclude` substring present.
# First hit wins. Names: "NVIDIA H100 80GB HBM3" (SXM), "NVIDIA H100 PCIe", "NVIDIA L4", "NVIDIA L40S", ...
DATASHEET: list[tuple[tuple[str, ...], tuple[str, ...], Peaks]] = [
    (("H100",), ("PCIe", "NVL"), Peaks("H100 SXM", fp32=66.9, bf16=989, fp16=989, hbm_tbps=3.35, tf32=495)),
    (("H200",), ("NVL", "GH200"), Peaks("H200", fp32=66.9, bf16=989, fp16=989, hbm_tbps=4.8, tf32=495)),
    (("A100", "SXM"), ("40GB",), Peaks("A100 SXM", fp32=19.5, bf16=312, fp16=312, hbm_tbps=2.0)),
    (("NVIDIA L4",), ("L40",), Peaks("L4", fp32=30.3, bf16=121, fp16=121, hbm_tbps=0.3)),
    (("RTX 4090",), ("4090 D",), Peaks("RTX 4090", fp32=82.6, bf16=165, fp16=165, hbm_tbps=1.0)),
]


def lookup_peaks(gpu_name: str | None) -> Peaks | None:
    """The DATASHEET entry for a device name, or None ("unknown")."""
    if not gpu_name:
        return None
    for match, exclude, peaks in DATASHEET:
        if all(m in gpu_name for m in match) and not any(x in gpu_name for x in exclude):
            return peaks
    return None


def describe_peaks(peaks: Peaks | None) -> str:
    if peaks is None:
        return "unknown"
    return (
        f"{peaks.name}: fp32 {peaks.fp32}, bf16 {peaks.bf16}, fp16 {peaks.fp16} TFLOP/s (dense), "
        f"HBM {peaks.hbm_tbps} TB/s"
    )


def peak_tflops(peaks: Peaks | None, dtype: torch.dtype, math: str | None = None) -> float | None:
    """The datasheet matmul peak for a dtype: float32 is plain FP32 unless math is "tf32" (the TF32 tensor-core
    peak, None where the datasheet entry has none); None when unknown."""
    if peaks is None:
        return None
    if math == "tf32" and dtype == torch.float32:
        return peaks.tf32
    return {torch.float32: peaks.fp32, torch.bfloat16: peaks.bf16, torch.float16: peaks.fp16}.get(dtype)


def _run_quiet(cmd: list[str]) -> str | None:
    """stdout of a command, or None if it is missing or fails."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, cwd=PACKAGE_ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def query_gpu_clocks(device: torch.device) -> dict[str, Any]:
    """SM clock now and max (MHz) and driver version from nvidia-smi; None values when it is unavailable."""
    info: dict[str, Any] = {"sm_clock_mhz": None, "sm_clock_max_mhz": None, "driver": None}
    query = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,driver_version", "--format=csv,noheader,nounits"]
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    out = _run_quiet([*query, f"--id=GPU-{uuid}"]) if uuid is not None else None
    out = out or _run_quiet(query)
    if out:
        fields = [f.strip() for f in out.splitlines()[0].split(",")]
        if len(fields) == 3:
            for key, value in zip(("sm_clock_mhz", "sm_clock_max_mhz"), fields[:2], strict=True):
                info[key] = int(value) if value.isdigit() else value
            info["driver"] = fields[2]
    return info


def collect_env(device: torch.device, settings: dict[str, Any]) -> dict[str, Any]:
    """What produced these numbers: device, clocks, versions, git commit, build, host, date, settings."""
    # CUDA_KERNELS_GIT_COMMIT names the commit where git cannot: a copy of the tree whose .git is missing or stale
    # (e.g. a tree copied to a GPU host without its .git); the tree's state is then unknown (git_dirty None).
    commit = os.environ.get("CUDA_KERNELS_GIT_COMMIT") or _run_quiet(["git", "rev-parse", "HEAD"])
    status = (
        _run_quiet(["git", "status", "--porcelain"]) if commit and "CUDA_KERNELS_GIT_COMMIT" not in os.environ else None
    )
    env: dict[str, Any] = {
        "device": device.type,
        "gpu": None,
        "sm_clock_mhz": None,
        "sm_clock_max_mhz": None,
        "driver": None,
        "l2_bytes": None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "git_commit": commit or "unknown",
        "git_dirty": bool(status) if status is not None else None,
        "build_info": cuda_kernels.build_info(),
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_threads": torch.get_num_threads(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=torch.cuda.get_device_name(device), l2_bytes=getattr(props, "L2_cache_size", None))
        env.update(query_gpu_clocks(device))
        peaks = lookup_peaks(env["gpu"])
        env["datasheet"] = asdict(peaks) if peaks else "unknown"
    return env
