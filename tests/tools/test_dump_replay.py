"""Repro dumps (CUDA_KERNELS_DUMP_DIR / set_dump_dir) and `python -m cuda_kernels.replay`."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest
import torch
from conftest import requires_cuda

import cuda_kernels
from cuda_kernels import _dump, ops
from cuda_kernels.tools import replay

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The line a dump prints (_dump.py). Tests that plant a failing call read it from capsys within the test: pytest
# prints what capsys holds at the end of the test under -s.
DUMP_NOTICE = "cuda_kernels: saved the failing "
DUMP_NAME = re.compile(r"(square|matmul)-\d{8}-\d{6}-\d{6}-\d+\.pt$")


@pytest.fixture
def dump_dir(tmp_path):
    saved = ops._DUMP_DIR
    cuda_kernels.set_dump_dir(tmp_path)
    yield tmp_path
    cuda_kernels.set_dump_dir(saved)


def dumps(directory) -> list[str]:
    return sorted(glob.glob(os.path.join(str(directory), "*.pt")))


def run_replay(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("CUDA_KERNELS_DUMP_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "cuda_kernels.replay", *args], env=env, capture_output=True, text=True, timeout=300
    )


def error_of(fn, *args, **kwargs) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return info.value


def test_a_failing_call_is_dumped_and_its_error_propagates_unchanged(dump_dir, capsys) -> None:
    x = torch.arange(6).reshape(2, 3)  # int64: square refuses it
    cuda_kernels.set_dump_dir(None)
    expected = error_of(cuda_kernels.square, x)
    assert dumps(dump_dir) == []
    cuda_kernels.set_dump_dir(dump_dir)
    got = error_of(cuda_kernels.square, x)
    assert type(got) is type(expected) and str(got) == str(expected)
    assert "cuda_kernels.square" in str(got)

    (path,) = dumps(dump_dir)
    assert DUMP_NAME.search(os.path.basename(path)) and not os.path.exists(path + ".tmp")
    assert f"rerun it: python -m cuda_kernels.replay {path}" in capsys.readouterr().err
    record = torch.load(path, weights_only=True)  # only tensors and plain types inside
    assert record["op"] == "square" and record["format"] == _dump.FORMAT
    assert record["exception"] == {"type": type(expected).__name__, "message": str(expected)}
    assert record["pid"] == os.getpid() and record["build_info"]["mode"] in ("installed", "jit")
    (arg,) = record["args"]
    assert arg["dtype"] == "int64" and arg["shape"] == [2, 3] and arg["device"] == "cpu"
    assert torch.equal(arg["data"], x.flatten())


def test_a_successful_call_writes_nothing(dump_dir) -> None:
    x = torch.randn(7)
    assert torch.equal(cuda_kernels.square(x), x * x)
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    torch.testing.assert_close(cuda_kernels.matmul(a, b), a @ b)
    assert dumps(dump_dir) == []


def test_replay_reproduces_the_error_and_exits_1(dump_dir, capsys) -> None:
    a = torch.randn(4, 3).t()  # (3, 4), a transposed view
    b = torch.randn(5, 2)  # inner dimensions differ
    error_of(cuda_kernels.matmul, a, b, variant=0)
    assert DUMP_NOTICE + "matmul call" in capsys.readouterr().err
    (path,) = dumps(dump_dir)
    proc = run_replay(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "inner dimensions differ" in proc.stdout and "same error as recorded" in proc.stdout
    assert "stride=(1, 3)" in proc.stdout  # the layout is shown
    assert dumps(dump_dir) == [path], "replaying must not write another dump"


def test_replay_of_a_call_that_now_succeeds_exits_0(tmp_path) -> None:
    x = torch.randn(3, 5)[:, 1:4]  # a non-contiguous view, as the op saw it
    path = _dump.write_dump(str(tmp_path), "square", (x,), {}, RuntimeError("an error that was fixed since"))
    proc = run_replay(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "did not reproduce" in proc.stdout


def test_replay_in_process_rebuilds_the_call(dump_dir, capsys) -> None:
    a = torch.randn(4, 3, dtype=torch.float64).t()
    error_of(cuda_kernels.matmul, a, torch.randn(3, 2, dtype=torch.float64), variant=0)
    assert DUMP_NOTICE + "matmul call" in capsys.readouterr().err
    record = replay.load(dumps(dump_dir)[0])
    assert record["kwargs"] == {"variant": 0, "allow_tf32": False}  # what the op got (the wrapper adds TF32)
    assert record["args"][0]["stride"] == [1, 3]
    err = replay.replay(record)
    assert isinstance(err, RuntimeError) and str(err) == record["exception"]["message"]


LAYOUTS = {
    "transposed": lambda: torch.randn(5, 7, dtype=torch.float64).t(),
    "sliced_with_offset": lambda: torch.randn(6, 9)[1:, 2::2],
    "row_of_a_matrix": lambda: torch.randn(4, 8)[2],
    "misaligned_half": lambda: torch.randn(33).half()[1:],  # data pointer 2 bytes past a 16-byte boundary
    "expanded_stride_0": lambda: torch.randn(3, 1).expand(3, 4),
    "zero_dim": lambda: torch.tensor(2.5),
    "empty": lambda: torch.randn(0, 3),
    "bfloat16_permuted": lambda: torch.randn(2, 3, 4).bfloat16().permute(2, 0, 1),
    "int64_strided": lambda: torch.arange(10)[::3],
}


@pytest.mark.parametrize("make", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_layouts_round_trip_through_a_dump_file(make, tmp_path) -> None:
    t = make()
    path = str(tmp_path / "t.pt")
    torch.save(_dump.pack([t]), path)
    (back,) = _dump.unpack(torch.load(path, weights_only=True))
    assert back.dtype == t.dtype and back.device == t.device
    assert back.shape == t.shape and back.stride() == t.stride() and back.storage_offset() == t.storage_offset()
    assert torch.equal(back, t)
    assert back.data_ptr() % 16 == t.data_ptr() % 16  # same alignment as the original: vector paths match


def test_requires_grad_is_kept(tmp_path) -> None:
    t = torch.randn(3, requires_grad=True)
    (back,) = _dump.unpack(_dump.pack([t]))
    assert back.requires_grad and torch.equal(back.detach(), t.detach())


def test_unreadable_data_still_gives_a_replayable_layout() -> None:
    entry = _dump.pack_tensor(torch.randn(4, 6)[:, ::2])
    entry["data"], entry["data_error"] = None, "AcceleratorError: an illegal memory access was encountered"
    back = _dump.unpack_tensor(entry)
    assert back.shape == (4, 3) and back.stride() == (6, 2) and torch.isfinite(back).all()
    assert "values not saved" in replay.describe(entry)


def test_the_variable_is_read_at_import(tmp_path) -> None:
    code = "import torch, cuda_kernels; cuda_kernels.square(torch.arange(3))"
    env = dict(os.environ, CUDA_KERNELS_DUMP_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "must be float32" in proc.stderr  # the op's own error, uncaught
    (path,) = dumps(tmp_path)
    assert f"python -m cuda_kernels.replay {path}" in proc.stderr  # printed, and as a note on the traceback


def test_a_failing_dump_does_not_hide_the_error(tmp_path, capsys) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    saved = ops._DUMP_DIR
    cuda_kernels.set_dump_dir(blocker)
    try:
        err = error_of(cuda_kernels.square, torch.arange(3))
    finally:
        cuda_kernels.set_dump_dir(saved)
    assert isinstance(err, RuntimeError) and "cuda_kernels.square" in str(err)
    assert "could not write a repro dump" in capsys.readouterr().err


def test_wrappers_stay_traceable_with_dumping_off() -> None:
    saved = ops._DUMP_DIR
    cuda_kernels.set_dump_dir(None)
    try:
        torch._dynamo.reset()
        x = torch.randn(8)
        a, b = torch.randn(4, 3), torch.randn(3, 5)
        sq = torch.compile(cuda_kernels.square, fullgraph=True, backend="eager")
        mm = torch.compile(lambda a, b: cuda_kernels.matmul(a, b), fullgraph=True, backend="eager")
        assert torch.equal(sq(x), x * x)
        torch.testing.assert_close(mm(a, b), (a.double() @ b.double()).float())
    finally:
        cuda_kernels.set_dump_dir(saved)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given on a machine without a GPU")
def test_replay_of_a_cuda_dump_without_a_gpu_says_use_cpu(tmp_path) -> None:
    path = _dump.write_dump(str(tmp_path), "square", (torch.arange(4),), {}, RuntimeError("x"))
    record = torch.load(path, weights_only=True)
    record["args"][0]["device"] = "cuda:0"
    torch.save(record, path)
    proc = run_replay(path)
    assert proc.returncode == 2 and "--device cpu" in proc.stderr
    proc = run_replay(path, "--device", "cpu")
    assert proc.returncode == 1 and "must be float32" in proc.stdout


@requires_cuda
@pytest.mark.gpu
def test_a_failing_cuda_call_replays_on_cuda(dump_dir, capsys) -> None:
    x = torch.arange(8, device="cuda")[::2]
    error_of(cuda_kernels.square, x)
    assert DUMP_NOTICE + "square call" in capsys.readouterr().err
    (path,) = dumps(dump_dir)
    record = torch.load(path, weights_only=True)
    assert record["args"][0]["device"] == "cuda:0" and record["args"][0]["stride"] == [2]
    proc = run_replay(path)
    assert proc.returncode == 1 and "same error as recorded" in proc.stdout, proc.stdout + proc.stderr


def test_replay_reruns_itself_under_compute_sanitizer(dump_dir, tmp_path, capsys) -> None:
    error_of(cuda_kernels.square, torch.arange(3))
    assert DUMP_NOTICE + "square call" in capsys.readouterr().err
    (path,) = dumps(dump_dir)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "compute-sanitizer"  # a stand-in: logs its arguments, runs the program after the options
    fake.write_text(
        '#!/usr/bin/env bash\necho "$@" > "$(dirname "$0")/args"\n'
        'while [ "$1" != "$FAKE_PYTHON" ]; do shift; done\nexec "$@"\n'
    )
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_kernels.replay", path, "--sanitizer", "racecheck"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "same error as recorded" in proc.stdout, proc.stdout + proc.stderr
    args = (bin_dir / "args").read_text().split()
    assert args[:4] == ["--tool", "racecheck", "--error-exitcode", "99"]
    assert args[4:] == [sys.executable, "-m", "cuda_kernels.replay", path]
