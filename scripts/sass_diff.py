"""Did a refactor change any kernel's machine code? Digests of every kernel's SASS in a built extension, compared.

    python scripts/sass_diff.py dump cuda_kernels/_C*.so before.json    # before the change
    python scripts/sass_diff.py dump cuda_kernels/_C*.so after.json     # after it, same archs and flags
    python scripts/sass_diff.py compare before.json after.json          # exit 1 if any kernel's code changed

`dump` runs `cuobjdump -sass` on the binary and stores, per arch, a hash of each kernel's instructions with
addresses and encodings left out (so a kernel renamed or moved to another file hashes the same). `compare` matches
kernels by name, then pairs the leftovers by identical code (renames), and lists what changed. cuobjdump is looked
up on PATH, then in the CUDA toolkit the build uses (cuda_kernels/tools/build_config.py's find_cuda_home).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def find_cuobjdump() -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    sys.path.insert(0, str(ROOT))
    from cuda_kernels.tools.build_config import find_cuda_home

    home = find_cuda_home()
    candidate = os.path.join(home, "bin", "cuobjdump") if home else ""
    if candidate and os.path.exists(candidate):
        return candidate
    sys.exit("sass_diff: cuobjdump not found on PATH or in the CUDA toolkit (set CUDA_HOME)")


def digest(binary: str) -> dict[str, dict[str, str]]:
    """{arch: {kernel name: hash of its instructions}}."""
    out = subprocess.run([find_cuobjdump(), "-sass", binary], capture_output=True, text=True, check=True).stdout
    result: dict[str, dict[str, str]] = collections.defaultdict(dict)
    arch, name, body = None, None, []

    def flush() -> None:
        if arch and name:
            result[arch][name] = hashlib.sha256("\n".join(body).encode()).hexdigest()[:16]

    for line in out.splitlines():
        if m := re.match(r"\s*arch = (sm_\w+)", line):
            flush()
            arch, name, body = m.group(1), None, []
        elif m := re.match(r"\s*Function : (\S+)", line):
            flush()
            name, body = m.group(1), []
        elif name:
            text = re.sub(r"/\*[0-9a-f]{4,}\*/|/\* 0x[0-9a-f]+ \*/", "", line).strip()  # address, encoding
            if text:
                body.append(text)
    flush()
    return dict(result)


def compare(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[str]:
    """One line per difference; [] when every kernel's code is the same."""
    problems = []
    for arch in sorted(set(before) | set(after)):
        old, new = before.get(arch, {}), after.get(arch, {})
        changed = [k for k in old if k in new and old[k] != new[k]]
        gone = collections.Counter(old[k] for k in old if k not in new)
        came = collections.Counter(new[k] for k in new if k not in old)
        renamed = sum((gone & came).values())
        problems += [f"{arch}: code changed: {k}" for k in changed]
        problems += [f"{arch}: removed: {k}" for k in old if k not in new and (gone - came)[old[k]] > 0]
        problems += [f"{arch}: added: {k}" for k in new if k not in old and (came - gone)[new[k]] > 0]
        print(f"{arch}: {len(old)} kernels before, {len(new)} after; {renamed} renamed with the same code")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="write the SASS digest of a binary")
    d.add_argument("binary")
    d.add_argument("out")
    c = sub.add_parser("compare", help="compare two digests; exit 1 on any difference")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args()
    if args.command == "dump":
        data = digest(args.binary)
        Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(", ".join(f"{arch}: {len(k)} kernels" for arch, k in sorted(data.items())))
        return 0
    problems = compare(json.loads(Path(args.before).read_text()), json.loads(Path(args.after).read_text()))
    print("\n".join(problems) if problems else "every kernel's machine code is the same")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
