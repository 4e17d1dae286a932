"""`python -m cuda_kernels.dev OP`: rebuild what changed, rerun OP's fast tests (cuda_kernels/tools/dev.py)."""

from cuda_kernels.tools.dev import main

if __name__ == "__main__":
    raise SystemExit(main())
