"""prescale_factor and postscale_factor give Horovod's results bit for bit: integers scale in
float64 and truncate, float16 (and bfloat16) scale in float32, float32 and float64 in their own
type, always by the factor rounded to that type."""
import pytest
import torch

import hvdsparse.torch as hvd

# 0.1 is not a float32: scaling by the float64 factor would differ from Horovod's float32 math
# for some of these values (9 * 0.1, for one).
FACTOR = 0.1


def values(dtype):
    return torch.arange(-100, 100, dtype=torch.float32).reshape(10, 20).to(dtype)


def scale_like_horovod(t, factor):
    """t * factor in the type Horovod's CPU ScaleBuffer computes in, back in t's dtype."""
    if t.dtype in (torch.float16, torch.bfloat16):
        math = torch.float32
    elif t.dtype.is_floating_point:
        math = t.dtype
    else:
        math = torch.float64
    return (t.to(math) * torch.tensor(factor, dtype=torch.float64).to(math)).to(t.dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64])
def test_allreduce_prescale_scales_each_input_like_horovod(dtype):
    got = hvd.allreduce(values(dtype), op=hvd.Sum, prescale_factor=FACTOR)
    want = scale_like_horovod(values(dtype), FACTOR) * hvd.size()
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16, torch.float32,
                                   torch.float64])
def test_allreduce_postscale_scales_the_sum_like_horovod(dtype):
    got = hvd.allreduce(values(dtype), op=hvd.Sum, postscale_factor=FACTOR)
    want = scale_like_horovod(values(dtype) * hvd.size(), FACTOR)
    assert torch.equal(got, want)


@pytest.mark.parametrize("grouped", [False, True])
def test_reducescatter_prescale_scales_like_horovod(grouped):
    size, rank = hvd.size(), hvd.rank()
    t = torch.arange(-100, -100 + 4 * size * 5, dtype=torch.float32).reshape(4 * size, 5)
    if grouped:
        got = hvd.grouped_reducescatter([t], op=hvd.Sum, prescale_factor=FACTOR)[0]
    else:
        got = hvd.reducescatter(t, op=hvd.Sum, prescale_factor=FACTOR)
    want = scale_like_horovod(t, FACTOR)[rank * 4:(rank + 1) * 4] * size
    assert torch.equal(got, want)


def test_float16_prescale_sums_round_to_float16_at_each_step():
    """The float16 result holds what float16 can: each addition of the sum rounds to float16 (as
    in Horovod), so at 3 ranks it is not float32(y) * 3 where that has no float16 value (why
    Horovod's float16 prescale tests fail at np 3 for any implementation; docs/pytorch.md)."""
    x = values(torch.float16)
    y = scale_like_horovod(x, FACTOR)
    want = y.clone()
    for _ in range(hvd.size() - 1):
        want = (want.to(torch.float32) + y.to(torch.float32)).to(torch.float16)
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=FACTOR)
    assert torch.equal(got, want)
    if hvd.size() == 3:
        exact = y.to(torch.float32) * 3
        assert not torch.equal(got.to(torch.float32), exact)  # some 3y are not float16 values
