import sys

from cuda_kernels.tools.bench.cli import main

sys.exit(main())
