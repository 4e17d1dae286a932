"""cuda_kernels.tools.matmul_tuning: each knob set through the private op and set back on exit, also on an error."""

from __future__ import annotations

import pytest
import torch

import cuda_kernels
from cuda_kernels.tools import matmul_tuning, tuning

# The op is registered in every build; a CPU-only build's raises that it has nothing to tune.
HAS_OP = cuda_kernels.build_info()["cuda"]


class FakeOp:
    """Stands in for torch.ops.cuda_kernels._matmul_tuning: a knob -> value table that logs every call."""

    def __init__(self, **values: str) -> None:
        self.values = dict(values)
        self.calls: list[tuple[str, str]] = []

    def __call__(self, knob: str, value: str) -> str:
        assert isinstance(value, str), value
        self.calls.append((knob, value))
        previous, self.values[knob] = self.values.get(knob, ""), value
        return previous


@pytest.fixture
def fake(monkeypatch) -> FakeOp:
    op = FakeOp(config08="kept")
    monkeypatch.setattr(tuning, "_tuning_op", lambda: op)
    return op


def test_knobs_are_set_as_strings_and_set_back(fake):
    with matmul_tuning(config06="16x128x16_w16x32_t4x4_s4_b4", splits06=3, config08="other"):
        assert fake.values == {"config06": "16x128x16_w16x32_t4x4_s4_b4", "splits06": "3", "config08": "other"}
    assert fake.values == {"config06": "", "splits06": "", "config08": "kept"}
    assert fake.calls[3:] == [("config08", "kept"), ("splits06", ""), ("config06", "")]  # in reverse order


def test_knobs_left_out_are_not_touched(fake):
    with matmul_tuning(matvec_blocks_per_sm=1):
        pass
    assert [knob for knob, _ in fake.calls] == ["matvec_blocks_per_sm", "matvec_blocks_per_sm"]


def test_knobs_are_set_back_when_the_block_raises(fake):
    with pytest.raises(ValueError, match="inside"), matmul_tuning(smem_limit_bytes=65536, config_fp64="x"):
        raise ValueError("inside")
    assert fake.values == {"config08": "kept", "smem_limit_bytes": "", "config_fp64": ""}


def test_a_refused_value_sets_back_what_was_set_before_it(fake, monkeypatch):
    def refusing(knob: str, value: str) -> str:
        if value == "bad":
            raise RuntimeError(f"cuda_kernels.matmul: {knob}={value} is not a compiled configuration")
        return fake(knob, value)

    monkeypatch.setattr(tuning, "_tuning_op", lambda: refusing)
    with pytest.raises(RuntimeError, match="config08=bad"), matmul_tuning(config06="a", config08="bad"):
        pytest.fail("the block must not run")
    assert fake.values == {"config08": "kept", "config06": ""}


def test_unknown_knob_is_a_type_error(fake):
    with pytest.raises(TypeError), matmul_tuning(config07="x"):  # type: ignore[call-arg]
        pass
    assert fake.calls == []


@pytest.mark.skipif(HAS_OP, reason="this build has CUDA kernels to tune")
def test_without_cuda_kernels_it_says_so():
    with pytest.raises(RuntimeError, match=r"^cuda_kernels.matmul_tuning: this build has no CUDA kernels to tune$"):
        with matmul_tuning(config06="x"):
            pass


@pytest.mark.skipif(not HAS_OP, reason="a CPU-only build has nothing to tune")
def test_the_extension_keeps_the_override_for_the_block():
    op = torch.ops.cuda_kernels._matmul_tuning
    with matmul_tuning(splits06=3):
        assert op("splits06", "3") == "3"  # the override is in place (and set again to the same)
    assert op("splits06", "") == ""  # and gone after the block
