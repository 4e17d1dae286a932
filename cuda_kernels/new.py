"""`python -m cuda_kernels.new NAME`: a new elementwise op in every place at once (cuda_kernels/tools/new.py)."""

from cuda_kernels.tools.new import main

if __name__ == "__main__":
    raise SystemExit(main())
