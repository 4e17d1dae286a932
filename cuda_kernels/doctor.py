"""`python -m cuda_kernels.doctor`: what a bug report needs, problems explained (cuda_kernels/tools/doctor.py)."""

from cuda_kernels.tools.doctor import main

if __name__ == "__main__":
    raise SystemExit(main())
