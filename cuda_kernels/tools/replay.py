"""Reruns a call saved by a repro dump (CUDA_KERNELS_DUMP_DIR) and reports whether it fails again.

    python -m cuda_kernels.replay DIR/square-20250101-120000-000000-1234.pt
    python -m cuda_kernels.replay FILE --device cpu            # same call on the CPU kernels
    python -m cuda_kernels.replay FILE --sanitizer memcheck    # under compute-sanitizer (also racecheck, ...)

Exit status: 0 the call succeeded, 1 it raised (the error is printed), 2 the dump or the device was unusable,
99 compute-sanitizer found errors (--sanitizer).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import Any

import torch

from cuda_kernels import _dump

SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
SANITIZER_ERROR_EXIT = 99


def find_compute_sanitizer() -> str | None:
    """compute-sanitizer on PATH, else in the CUDA toolkit that the build uses."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    from cuda_kernels.tools.build_config import find_cuda_home

    home = find_cuda_home()
    for rel in ("bin/compute-sanitizer", "compute-sanitizer/compute-sanitizer"):
        if home and os.access(os.path.join(home, rel), os.X_OK):
            return os.path.join(home, rel)
    return None


def sanitizer_command(tool: str, file: str, device: str | None) -> list[str] | None:
    """The command that reruns this replay under compute-sanitizer, or None if it is not installed."""
    exe = find_compute_sanitizer()
    if exe is None:
        return None
    cmd = [exe, "--tool", tool, "--error-exitcode", str(SANITIZER_ERROR_EXIT)]
    cmd += [sys.executable, "-m", "cuda_kernels.replay", file]
    if device:
        cmd += ["--device", device]
    return cmd


def load(file: str) -> dict[str, Any]:
    """Reads a dump with torch.load(weights_only=True) (a dump holds only tensors and plain types)."""
    record = torch.load(file, map_location="cpu", weights_only=True)
    if not isinstance(record, dict) or record.get("format") != _dump.FORMAT or "op" not in record:
        raise ValueError(f"{file} is not a cuda_kernels repro dump (format {_dump.FORMAT})")
    return record


def describe(value: Any) -> str:
    """One line per argument: tensors by layout, everything else by repr."""
    if isinstance(value, dict) and value.get("__tensor__"):
        note = "" if value["data"] is not None else f"  (values not saved: {value['data_error']})"
        return (
            f"tensor {value['dtype']} shape={tuple(value['shape'])} stride={tuple(value['stride'])} "
            f"offset={value['storage_offset']} device={value['device']}{note}"
        )
    return repr(value)


def replay(record: dict[str, Any], device: str | None = None) -> BaseException | None:
    """Runs the recorded call with dumping switched off; returns the exception it raised, or None."""
    import cuda_kernels

    args = _dump.unpack(record["args"], device)
    kwargs = _dump.unpack(record["kwargs"], device)
    # The op itself, with the arguments it got (the wrapper may have added some: matmul's allow_tf32).
    fn = getattr(torch.ops.cuda_kernels, record["op"]).default
    cuda_kernels.set_dump_dir(None)  # the replayed failure must not write a new dump
    try:
        fn(*args, **kwargs)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # asynchronous kernel faults surface here
    except Exception as exc:  # noqa: BLE001  (any error is the answer)
        return exc
    return None


def _devices_of(record: dict[str, Any]) -> set[str]:
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict) and v.get("__tensor__"):
            found.add(v["device"])
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(record["args"])
    walk(record["kwargs"])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cuda_kernels.replay", description=__doc__.split("\n")[0])
    parser.add_argument("file", help="a .pt file written under CUDA_KERNELS_DUMP_DIR")
    parser.add_argument("--device", help="run on this device instead of the recorded one (e.g. cpu, cuda:1)")
    parser.add_argument(
        "--sanitizer",
        nargs="?",
        const="memcheck",
        choices=SANITIZER_TOOLS,
        help="rerun this replay under compute-sanitizer --tool TOOL (default memcheck)",
    )
    opts = parser.parse_args(argv)

    if opts.sanitizer:
        cmd = sanitizer_command(opts.sanitizer, opts.file, opts.device)
        if cmd is None:
            print("replay: compute-sanitizer not found (on PATH or in $CUDA_HOME/bin)", file=sys.stderr)
            return 2
        print("replay: " + " ".join(cmd), flush=True)
        return subprocess.call(cmd)

    try:
        record = load(opts.file)
    except Exception as err:  # noqa: BLE001
        print(f"replay: cannot read {opts.file}: {err}", file=sys.stderr)
        return 2
    print(f"replay: cuda_kernels.{record['op']} recorded {record['time']} (pid {record['pid']})")
    for i, a in enumerate(record["args"]):
        print(f"  arg {i}: {describe(a)}")
    for k, v in record["kwargs"].items():
        print(f"  {k}: {describe(v)}")
    if record["exception"]:
        print(f"  recorded error: {record['exception']['type']}: {record['exception']['message']}")
    then = record.get("build_info", {})
    print(f"  built then: {then}")

    for dev in {opts.device} if opts.device else _devices_of(record):
        if dev.startswith("cuda") and not torch.cuda.is_available():
            why = f"--device {dev}" if opts.device else f"the call ran on {dev}"
            print(f"replay: {why} but no CUDA device is visible; try --device cpu", file=sys.stderr)
            return 2
    try:
        err = replay(record, opts.device)
    except ImportError as import_err:
        print(f"replay: {import_err}", file=sys.stderr)
        return 2
    if err is None:
        print("replay: the call succeeded: the error did not reproduce")
        return 0
    print(f"replay: the call raised {type(err).__name__}: {err}")
    recorded = record["exception"]
    first_line = str(err).split("\n")[0]
    if recorded and recorded["type"] == type(err).__name__ and recorded["message"].split("\n")[0] == first_line:
        print("replay: same error as recorded")
    elif recorded:
        print("replay: a different error than recorded (see above)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
