"""`python -m cuda_kernels.new NAME [--schema "(Tensor x, ...) -> Tensor"]`: a new op in every place at once, elementwise
or of the schema's signature (cuda_kernels/tools/new.py)."""

from cuda_kernels.tools.new import main

if __name__ == "__main__":
    raise SystemExit(main())
