"""`python -m cuda_kernels.replay FILE`: rerun a call saved by a repro dump (cuda_kernels/tools/replay.py)."""

from cuda_kernels.tools.replay import main

if __name__ == "__main__":
    raise SystemExit(main())
