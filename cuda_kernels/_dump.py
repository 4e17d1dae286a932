"""Repro dumps: when an op raises, save its arguments so `python -m cuda_kernels.replay FILE` can rerun the call.

Switched on by CUDA_KERNELS_DUMP_DIR=DIR, read once when cuda_kernels is imported (cuda_kernels.set_dump_dir(path)
or set_dump_dir(None) changes it at run time). Off, the ops' wrappers pay one global-variable test per call.

A dump is a torch.save'd dict holding only tensors and plain types, so torch.load(weights_only=True) reads it:

    {"format": 1, "op": "square", "args": [arg, ...], "kwargs": {name: arg},
     "exception": {"type": "RuntimeError", "message": "..."}, "time": "2025-...", "unix_time": float, "pid": int,
     "argv": [...], "torch": "2.14.1+cu130", "build_info": {...}}

where a tensor argument is stored as its layout plus the part of its storage it can reach, on the CPU:

    {"__tensor__": True, "device": "cuda:0", "dtype": "float32", "shape": [...], "stride": [...],
     "storage_offset": int, "requires_grad": bool, "data": 1-D CPU tensor of the reachable storage or None,
     "data_error": None or why the data could not be read (e.g. the CUDA context died)}

Rebuilt with as_strided on a fresh buffer, it has the original shape, strides and storage offset, hence the same
16-byte alignment of its data pointer, on the original device (or any other: replay --device).
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

FORMAT = 1


def dir_from_env() -> str | None:
    """CUDA_KERNELS_DUMP_DIR, or None when unset or empty."""
    return os.environ.get("CUDA_KERNELS_DUMP_DIR") or None


def _reachable_span(t: torch.Tensor) -> int:
    """How many storage elements, from storage_offset on, the view can touch (0 for an empty tensor)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))


def pack_tensor(t: torch.Tensor) -> dict[str, Any]:
    """A tensor as plain data: layout, device and the reachable storage copied to the CPU (see module doc)."""
    entry: dict[str, Any] = {
        "__tensor__": True,
        "device": str(t.device),
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": int(t.storage_offset()),
        "requires_grad": bool(t.requires_grad),
        "data": None,
        "data_error": None,
    }
    try:
        flat = t.detach().as_strided((_reachable_span(t),), (1,), t.storage_offset())
        entry["data"] = flat.to("cpu", copy=True)
    except Exception as err:  # noqa: BLE001  (after e.g. an illegal address, no copy off the GPU works)
        entry["data_error"] = f"{type(err).__name__}: {err}".strip()
    return entry


def unpack_tensor(entry: dict[str, Any], device: str | None = None) -> torch.Tensor:
    """Rebuilds a packed tensor with its shape, strides and storage offset on `device` (default: its own).

    Without saved data (data_error), the values are seeded random numbers (zeros for non-float dtypes).
    """
    dtype = getattr(torch, entry["dtype"])
    device = device or entry["device"]
    offset = entry["storage_offset"]
    span = _reachable_span(torch.empty_strided(entry["shape"], entry["stride"], device="meta"))
    base = torch.empty(offset + span, dtype=dtype, device=device)
    data = entry["data"]
    if data is None:
        g = torch.Generator().manual_seed(0)
        if dtype.is_floating_point or dtype.is_complex:
            data = torch.randn(span, generator=g).to(dtype)
        else:
            data = torch.zeros(span, dtype=dtype)
    base[offset:] = data.to(device)
    out = base.as_strided(entry["shape"], entry["stride"], offset)
    if entry.get("requires_grad") and (dtype.is_floating_point or dtype.is_complex):
        out.requires_grad_(True)
    return out


def pack(value: Any) -> Any:
    """Tensors -> packed dicts; lists/tuples/dicts recursively; plain values unchanged; anything else -> repr."""
    if isinstance(value, torch.Tensor):
        return pack_tensor(value)
    if isinstance(value, (list, tuple)):
        return [pack(v) for v in value]
    if isinstance(value, dict):
        return {str(k): pack(v) for k, v in value.items()}
    if value is None:
        return None
    # Exact builtin types only (weights_only refuses subclasses such as torch.__version__'s TorchVersion).
    for plain in (bool, int, float, str):
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    return repr(value)


def unpack(value: Any, device: str | None = None) -> Any:
    """Inverse of pack (tuples come back as lists)."""
    if isinstance(value, dict) and value.get("__tensor__"):
        return unpack_tensor(value, device)
    if isinstance(value, list):
        return [unpack(v, device) for v in value]
    if isinstance(value, dict):
        return {k: unpack(v, device) for k, v in value.items()}
    return value


def _build_info() -> dict[str, Any]:
    try:
        import cuda_kernels

        return pack(cuda_kernels.build_info())
    except Exception as err:  # noqa: BLE001
        return {"error": str(err)}


def write_dump(directory: str, op: str, args: tuple, kwargs: dict, exc: BaseException | None) -> str:
    """Saves one call to DIR/<op>-<YYYYmmdd-HHMMSS-micro>-<pid>.pt (flushed and fsynced); returns the path."""
    now = datetime.datetime.now()
    record = {
        "format": FORMAT,
        "op": op,
        "args": pack(list(args)),
        "kwargs": pack(dict(kwargs)),
        "exception": None if exc is None else {"type": type(exc).__name__, "message": str(exc)},
        "time": now.isoformat(timespec="microseconds"),
        "unix_time": now.timestamp(),
        "pid": os.getpid(),
        "argv": [str(a) for a in sys.argv],
        "torch": str(torch.__version__),
        "build_info": _build_info(),
    }
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{op}-{now.strftime('%Y%m%d-%H%M%S-%f')}-{os.getpid()}.pt")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # a reader never sees a half-written dump
    return path


def call_and_dump(directory: str, op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Runs fn(*args, **kwargs); if it raises, writes a dump to `directory` first, then re-raises the same error."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        try:
            path = write_dump(directory, op, args, kwargs, exc)
        except Exception as dump_err:  # noqa: BLE001  (never hide the op's own error behind ours)
            print(f"cuda_kernels: could not write a repro dump to {directory}: {dump_err}", file=sys.stderr)
        else:
            hint = (
                f"cuda_kernels: saved the failing {op} call to {path}; rerun it: python -m cuda_kernels.replay {path}"
            )
            print(hint, file=sys.stderr)
            if hasattr(exc, "add_note"):  # Python 3.11+: shown under the traceback; str(exc) is unchanged
                exc.add_note(hint)
        raise
