"""Wall-clock timings of the edit-compile-test loop (docs/debugging.md, "Loop timings"), each row with its command.

    python scripts/loop_timings.py --json out/loop_timings.json           # every row
    python scripts/loop_timings.py --rows import_torch,dev_edit --repeat 5

Run from the repository root with the extension installed (`make install`). Each row runs a whole process, as a user
types it, `--repeat` times, and keeps the median. "Edit" rows append a comment line to the edited kernel source
first (a new one each run, so the content, which the JIT hashes, changes); the file is restored at the end, even on
failure. The JIT rows use their own cache folder (CUDA_KERNELS_JIT_DIR under the system's temp folder), so a
user's cache is not touched, and its first build is reported as `jit_cold_build`. The `clean_build` row removes
build/ and rebuilds the installed extension: it runs last, and leaves the extension installed as before.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
EDITED = os.path.join("csrc", "cpu", "square.cpp")  # replaced by the CUDA source when the build has CUDA
EDITED_CUDA = os.path.join("csrc", "cuda", "square.cu")
# A Hopper step of the matmul ladder, for the row that rebuilds one ladder step (CUDA builds only).
EDITED_STEP = os.path.join("csrc", "cuda", "matmul", "11_tma_store.cu")
PIP_INSTALL = [PY, "-m", "pip", "install", "-q", "--no-build-isolation", "-e", "."]
FAST_ONE_OP = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", "tests/test_square.py"]


def rows(jit_dir: str) -> dict[str, dict[str, object]]:
    """name -> {"cmd": [...], "env": {...}, "edit": bool, "what": str}; the order is the order they run in."""
    jit = {"CUDA_KERNELS_JIT": "1", "CUDA_KERNELS_JIT_DIR": jit_dir}
    return {
        "import_torch": {"what": "`import torch` alone", "cmd": [PY, "-c", "import torch"]},
        "import_installed": {
            "what": "installed: `import torch, cuda_kernels`",
            "cmd": [PY, "-c", "import torch, cuda_kernels"],
        },
        "jit_cold_build": {
            "what": "JIT, first build into an empty cache (every source)",
            "cmd": [PY, "-c", "import torch, cuda_kernels"],
            "env": jit,
            "once": True,
        },
        "import_jit": {
            "what": "JIT, nothing changed: `CUDA_KERNELS_JIT=1 python -c 'import torch, cuda_kernels'`",
            "cmd": [PY, "-c", "import torch, cuda_kernels"],
            "env": jit,
        },
        "dev_edit": {
            "what": "one kernel source edited, then `make dev OP=square` (JIT rebuild + the op's fast tests)",
            "cmd": [PY, "-m", "cuda_kernels.dev", "square"],
            "env": {"CUDA_KERNELS_JIT_DIR": jit_dir},
            "edit": True,
        },
        "dev_noedit": {
            "what": "nothing edited, `make dev OP=square`",
            "cmd": [PY, "-m", "cuda_kernels.dev", "square"],
            "env": {"CUDA_KERNELS_JIT_DIR": jit_dir},
        },
        "pip_noedit": {
            "what": "nothing edited, `pip install --no-build-isolation -e .` (pip's and setup.py's own cost)",
            "cmd": PIP_INSTALL,
        },
        "pip_edit": {
            "what": "one kernel source edited, then `pip install --no-build-isolation -e .` and the op's fast tests",
            "cmd": [*PIP_INSTALL, "&&", *FAST_ONE_OP],
            "edit": True,
        },
        "pip_edit_step": {
            "what": "one matmul ladder step edited (11_tma_store.cu), then `pip install --no-build-isolation -e .`",
            "cmd": PIP_INSTALL,
            "edit": EDITED_STEP,
            "needs_cuda": True,
        },
        "fast_one_op": {
            "what": "one op's fast tier: `pytest -q -m 'not slow' tests/test_square.py`",
            "cmd": FAST_ONE_OP,
        },
        "test_fast": {
            "what": "every fast test: `make test-fast`",
            "cmd": ["make", "test-fast", f"PYTHON={PY}"],
            "once": True,
        },
        "test_fast_xdist": {
            "what": "every fast test over 8 pytest-xdist workers sharing the GPU",
            "cmd": [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", "-n", "8"],
            "once": True,
            "needs": "xdist",
        },
        "clean_build": {
            "what": "clean build of the installed extension: `rm -rf build && pip install --no-build-isolation -e .`",
            "cmd": ["rm", "-rf", "build", "&&", *PIP_INSTALL],
            "once": True,
        },
    }


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, exit code, last lines of output) of cmd; '&&' splits it into commands run one after another."""
    parts, part = [], []
    for word in cmd:
        if word == "&&":
            parts.append(part)
            part = []
        else:
            part.append(word)
    parts.append(part)
    start = time.perf_counter()
    out = ""
    for p in parts:
        proc = subprocess.run(p, cwd=ROOT, env=env, capture_output=True, text=True)
        out += proc.stdout + proc.stderr
        if proc.returncode != 0:
            return time.perf_counter() - start, proc.returncode, out[-3000:]
    return time.perf_counter() - start, 0, "\n".join(out.strip().splitlines()[-3:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", help="comma-separated row names (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the median is kept (default 3)")
    parser.add_argument("--json", help="write the records here")
    args = parser.parse_args(argv)

    sys.path.insert(0, ROOT)
    import torch

    import cuda_kernels

    info = cuda_kernels.build_info()
    edited = EDITED_CUDA if info["cuda"] else EDITED
    jit_dir = tempfile.mkdtemp(prefix="cuda_kernels_loop_jit_")
    table = rows(jit_dir)
    names = args.rows.split(",") if args.rows else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"loop_timings: unknown rows {unknown}; rows: {', '.join(table)}")
    warm_jit_rows = ("import_jit", "dev_edit", "dev_noedit")  # they need a warm JIT cache: build it first
    if any(n in names for n in warm_jit_rows) and "jit_cold_build" not in names:
        names.insert(names.index(next(n for n in names if n in warm_jit_rows)), "jit_cold_build")
    names.sort(key=list(table).index)
    for name in list(names):  # rows that need an optional package (pytest-xdist) or CUDA are left out without it
        needs = table[name].get("needs")
        if needs and importlib.util.find_spec(needs) is None:
            print(f"{name}: left out ({needs} is not installed)")
            names.remove(name)
        elif table[name].get("needs_cuda") and not info["cuda"]:
            print(f"{name}: left out (a CPU-only build)")
            names.remove(name)

    def write_json() -> None:  # after every row, so a run cut short keeps what it measured
        if not args.json:
            return
        env_block = {
            "machine": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "build_info": {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool, list))},
            "git_commit": os.environ.get("CUDA_KERNELS_GIT_COMMIT", ""),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "argv": sys.argv[1:],
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"env": env_block, "rows": records}, f, indent=1)

    # The files edit rows change ("edit": True edits the op's kernel, a path edits that file), restored at the end.
    edited_by = {n: (edited if table[n].get("edit") is True else table[n].get("edit")) for n in names}
    originals = {}
    for path in {p for p in edited_by.values() if p}:
        with open(os.path.join(ROOT, path)) as f:
            originals[path] = f.read()
    records, edits = [], 0
    try:
        for name in names:
            row = table[name]
            env = dict(os.environ, **row.get("env", {}))
            times, code, tail = [], 0, ""
            for _ in range(1 if row.get("once") else args.repeat):
                if edited_by[name]:
                    edits += 1
                    with open(os.path.join(ROOT, edited_by[name]), "w") as f:
                        f.write(originals[edited_by[name]] + f"// loop_timings edit {edits}\n")
                seconds, code, tail = run_once(row["cmd"], env)
                times.append(seconds)
                if code != 0:
                    break
            cmd = " ".join(row["cmd"]).replace(PY, "python")
            record = {
                "row": name,
                "what": row["what"],
                "command": cmd,
                "env": row.get("env", {}),
                "edited": edited_by[name],
                "seconds": times,
                "median_s": statistics.median(times),
                "exit_code": code,
                "tail": tail,
            }
            records.append(record)
            write_json()
            status = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"{name:18s} median {record['median_s']:7.2f} s of {len(times)}  {status}  [{cmd}]", flush=True)
            if code != 0:
                print(tail, file=sys.stderr)
    finally:
        for path, text in originals.items():
            with open(os.path.join(ROOT, path), "w") as f:
                f.write(text)
        shutil.rmtree(jit_dir, ignore_errors=True)

    return 1 if any(r["exit_code"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
