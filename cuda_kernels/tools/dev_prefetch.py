"""The edit loop's head start (`python -m cuda_kernels.dev`, cuda_kernels/tools/dev.py): cuda_kernels/__init__.py calls
start_prefetch() under the loop before the JIT build, so that what the tests import runs beside the compiler.
A module of its own, so that the package need not import cuda_kernels.dev before runpy runs it."""

from __future__ import annotations

import importlib
import threading

# What torch.library.opcheck imports on its first call (its test_schema and test_aot_dispatch_dynamic utilities).
PREFETCH = ("torch.testing._internal.optests", "torch._inductor.pattern_matcher", "torch._functorch.partitioners")


def start_prefetch() -> threading.Thread:
    """Starts importing PREFETCH in a background thread: the imports run while the main thread waits for the
    compiler."""

    def work() -> None:
        for name in PREFETCH:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001  (the tests import it again and report what is wrong)
                return

    thread = threading.Thread(target=work, name="cuda_kernels.dev prefetch", daemon=True)
    thread.start()
    return thread
