import sys

from cuda_kernels.bench.cli import main

sys.exit(main())
