"""Python's operators on kiln.Tensor against numpy's on arrays."""

import operator

import numpy as np
import pytest

import kiln
from conftest import require_feature

FLOAT_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
             operator.mod, operator.lt, operator.le, operator.gt, operator.ge, operator.eq,
             operator.ne]
INT_OPS = FLOAT_OPS + [operator.and_, operator.or_, operator.xor]


def _same(got, want):
    assert isinstance(got, kiln.Tensor)
    g = got.numpy()
    # kiln's dtypes for numpy's wider results.
    assert g.dtype == {np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32}.get(
        want.dtype, want.dtype)
    assert g.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(g, want, rtol=2e-6, atol=2e-6)
    else:
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("op", FLOAT_OPS, ids=lambda f: f.__name__)
def test_float_operators(device, rng, op):
    a = rng.uniform(-2, 2, (7, 1)).astype(np.float32)
    # Powers of two: exact quotients, so // and % floor as numpy does.
    b = (rng.choice([-1, 1], 33) * 2.0 ** rng.integers(-2, 2, 33)).astype(np.float32)
    ta, tb = kiln.tensor(a, device), kiln.tensor(b, device)
    want = op(a, b)
    _same(op(ta, tb), want)
    _same(op(ta, b), want)          # numpy array on the right
    _same(op(a, tb), want)          # on the left: numpy defers to the tensor
    _same(op(ta, 0.5), op(a, np.float32(0.5)))
    _same(op(0.5, tb), op(np.float32(0.5), b))
    _same(op(ta, np.float32(0.5)), op(a, np.float32(0.5)))  # numpy scalars
    _same(op(np.float32(0.5), tb), op(np.float32(0.5), b))


@pytest.mark.parametrize("op", INT_OPS, ids=lambda f: f.__name__)
def test_int_operators(device, rng, op):
    a = rng.integers(-1000, 1000, (5, 1, 7)).astype(np.int32)
    b = rng.integers(1, 50, (4, 1)).astype(np.int32) * rng.choice([-1, 1], (4, 1)).astype(np.int32)
    ta, tb = kiln.tensor(a, device), kiln.tensor(b, device)
    want = op(a, b)
    if op is operator.truediv:  # numpy's true division; kiln's in float32
        want = want.astype(np.float32)
    _same(op(ta, tb), want)
    _same(op(ta, 3), op(a, np.int32(3)))
    _same(op(ta, np.int32(3)), op(a, np.int32(3)))


def test_division_by_a_zero_constant_is_ieee(device, rng):
    # numpy's results: +-inf, and NaN for 0/0 and NaN, whichever zero.
    a = np.concatenate([[1, -2, 0, -0.0, np.nan, np.inf, -np.inf],
                        rng.uniform(-2, 2, 26)]).astype(np.float32)
    ta = kiln.tensor(a, device)
    with np.errstate(divide="ignore", invalid="ignore"):
        for zero in (0.0, -0.0):
            for op in (operator.truediv, operator.floordiv, operator.mod):
                want = op(a, np.float32(zero))
                got = op(ta, zero).numpy()
                if op is operator.mod:  # numpy's mod by zero is NaN, sign aside
                    assert np.isnan(got).all(), (op, zero, got)
                else:
                    np.testing.assert_array_equal(got, want, err_msg=f"{op.__name__} {zero}")
        i = kiln.tensor(np.array([1, -2, 0, 7], np.int32), device)
        np.testing.assert_array_equal((i / 0).numpy(),
                                      np.array([np.inf, -np.inf, np.nan, np.inf], np.float32))


def test_unary_shift_power_and_matmul(device, rng):
    x = rng.uniform(0.5, 2, (7, 33)).astype(np.float32)
    i = rng.integers(-100, 100, 50).astype(np.int32)
    t, ti = kiln.tensor(x, device), kiln.tensor(i, device)
    _same(-t, -x)
    _same(+t, x)
    _same(abs(-t), x)
    _same(t ** 2, x ** 2)
    _same(2 ** t, np.float32(2) ** x)
    # int32 powers wrap as numpy's int32 arithmetic does.
    p = rng.integers(-20, 20, (7, 33)).astype(np.int32)
    tp = kiln.tensor(p, device)
    np.testing.assert_array_equal((tp ** 3).numpy(), p ** 3)
    np.testing.assert_array_equal((tp ** tp.clip(0, 9)).numpy(), p ** np.clip(p, 0, 9))
    _same(~ti, ~i)
    _same(-ti, -i)
    _same(ti << 3, i << 3)
    _same(ti >> 2, i >> 2)
    w = rng.standard_normal((33, 5)).astype(np.float32)
    np.testing.assert_allclose((t @ kiln.tensor(w, device)).numpy(), x @ w, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose((x @ kiln.tensor(w, device)).numpy(), x @ w, rtol=1e-5, atol=1e-4)


def test_half_power_of_tensors(device, rng):
    # pow of f16 tensors runs in f32 and rounds once: 65504 ** 1 stays
    # finite and 1000 ** 1 exact (in f16, exp2(y * log2(x)) is not).
    require_feature(device, "shader-f16")
    a = np.concatenate([[65504, -2.5, 1000, 2, 0.5, 0, -0.0, np.inf, np.nan],
                        rng.uniform(0.5, 4, 40)]).astype(np.float16)
    e = np.concatenate([[1, 7, 1, 10, 3, 2, 3, 0.5, 1],
                        rng.uniform(-3, 3, 40)]).astype(np.float16)
    got = kiln.ops.pow(kiln.tensor(a, device), kiln.tensor(e, device)).numpy()
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), e.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(got[:9], want[:9])
    np.testing.assert_allclose(got[9:].astype(np.float64), want[9:].astype(np.float64),
                               rtol=2e-3)
    # A constant exponent of 0.5 is numpy's `x ** 0.5` on f16 too: a square
    # root ((-inf) ** 0.5 is NaN, (-0.0) ** 0.5 is -0.0).
    s = np.concatenate([[-np.inf, -0.0, 0.0, np.inf, np.nan, -1, 65504, 6e-8],
                        rng.uniform(0, 100, 40)]).astype(np.float16)
    with np.errstate(invalid="ignore"):
        want = np.sqrt(s)
    for got in ((kiln.tensor(s, device) ** 0.5).numpy(),
                kiln.ops.pow(kiln.tensor(s, device), 0.5).numpy()):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got[:8], want[:8])
        number = ~np.isnan(want[:8])  # (a NaN's sign is the device's)
        np.testing.assert_array_equal(np.signbit(got[:8][number]), np.signbit(want[:8][number]))
        np.testing.assert_allclose(got[8:].astype(np.float64), want[8:].astype(np.float64),
                                   rtol=2e-3)


def test_bool_tensors_are_logical(device, rng):
    x = rng.uniform(-1, 1, 100).astype(np.float32)
    t = kiln.tensor(x, device)
    a, b = t > 0, t < 0.5
    _same(a & b, (x > 0) & (x < 0.5))
    _same(a | b, (x > 0) | (x < 0.5))
    _same(a ^ b, (x > 0) ^ (x < 0.5))
    _same(~a, ~(x > 0))
    _same(a & True, (x > 0) & True)
    _same(~(a ^ np.True_), ~((x > 0) ^ True))
    _same(kiln.ops.invert(a), np.invert(x > 0))
    _same(a == True, (x > 0) == True)  # noqa: E712
    _same(a / 2, (x > 0) / np.float32(2))
    assert int(kiln.ops.sum(a).numpy()) == int(np.sum(x > 0))


def test_truth_and_identity(device):
    one = kiln.tensor(np.array([3.0], np.float32), device)
    assert bool(one > 2) is True
    assert bool(one < 2) is False
    many = kiln.tensor(np.arange(4, dtype=np.float32), device)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(many > 1)
    # Identity hash; == with something that is not an operand is an error,
    # not Python's identity answer (which would read as an elementwise one).
    assert len({one, many, one}) == 2
    with pytest.raises(TypeError, match="==: cannot compare a kiln.Tensor with NoneType"):
        many == None  # noqa: E711, B015
    with pytest.raises(TypeError, match="!=: cannot compare a kiln.Tensor with str"):
        "a" != many  # noqa: B015
    np.testing.assert_array_equal((many == np.float32(2)).numpy(), [False, False, True, False])
    np.testing.assert_array_equal((2 != many).numpy(), [True, True, False, True])
    with pytest.raises(TypeError):
        many + [1, 2]  # noqa: B018
    with pytest.raises(kiln.InvalidArgument, match="do not broadcast"):
        many + kiln.tensor(np.ones(3, np.float32), device)  # noqa: B018
    # Inputs within the size limit broadcast beyond it: refused before any
    # kernel is built (the result alone would be 8 GiB).
    row = kiln.tensor(np.ones((1, 2 ** 16), np.float32), device)
    column = kiln.tensor(np.ones((2 ** 15, 1), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match=r"broadcast to \[32768, 65536\]: more than"):
        row + column  # noqa: B018
    ints = kiln.tensor(np.arange(4, dtype=np.int32), device)
    for bad in (2 ** 40, 0.5, float("nan")):
        with pytest.raises(kiln.InvalidArgument, match="is not an int32 value"):
            ints < bad  # noqa: B015


def test_errors_with_numbers_name_the_operation(device):
    # t + 2.5 runs as a one-step chain; its errors are the operator's.
    ints = kiln.tensor(np.arange(4, dtype=np.int32), device)
    floats = kiln.tensor(np.ones(4, np.float32), device)
    bools = ints > 1
    bad = kiln.InvalidArgument
    for call, message in [
            (lambda: ints << 2**40, r"^shift_left: the number 1099511627776 is not an int32 value"),
            (lambda: ints & 2.5, r"^bitwise_and: the number 2.5 is not an int32 value"),
            # Comparisons name a bool as given too (it runs as int32).
            (lambda: bools < 0.5, r"^lt: the number 0.5 is not an int32 value \(the tensor "
                                  r"operand is bool"),
            (lambda: kiln.ops.gt(0.5, bools), r"^gt: the number 0.5 is not an int32 value \(the "
                                              r"tensor operand is bool"),
            (lambda: bools == floats, r"^eq: dtype mismatch: A is bool, B is float32 \(bool "
                                      r"operands run as int32"),
            (lambda: kiln.tensor(np.ones(4, np.float16), device) != floats,
             r"^ne: dtype mismatch: A is float16, B is float32 \(cast one to the other's dtype\)"),
            (lambda: kiln.tensor(np.zeros((0, 2), np.int32), device) << 2.5,
             r"^shift_left: the number 2.5 is not an int32 value"),
            (lambda: ints.sum() << 2.5, r"^shift_left: the number 2.5 is not an int32 value"),
            (lambda: floats & 3, r"^input A of bitwise_and is f32, but bitwise_and takes i32"),
            (lambda: 3 ^ floats, r"^input A of bitwise_xor is f32"),
            (lambda: kiln.tensor(np.ones(3, np.uint32), device) + -1,
             r"^add: the number -1 is not a uint32 value \(the tensor operand is uint32"),
            (lambda: kiln.tensor(np.ones(3, np.uint32), device) < 2**32,
             r"^lt: the number 4294967296 is not a uint32 value"),
            (lambda: kiln.tensor(np.ones(3, np.uint32), device) + ints,
             r"^add: dtype mismatch: A is u32 but B is i32")]:
        with pytest.raises(bad, match=message) as e:
            call()
        assert "chain" not in str(e.value)
    # Integers past float64's range (numpy's OverflowError names nothing).
    for call, name in [(lambda: ints + 2**1100, "add"), (lambda: floats - 2**1024, "sub"),
                       (lambda: floats * (2**1024 - 2**970), "mul"),
                       (lambda: ints - (2**970 - 2**1024), "sub"),
                       (lambda: floats < -2**2000, "lt"), (lambda: floats / 2**1100, "div"),
                       (lambda: kiln.ops.where(bools, 2**1100, floats), "where"),
                       (lambda: kiln.ops.clip(floats, 0, 2**1100), "clip"),
                       (lambda: kiln.ops.pad(floats, 1, 1, value=2**1100), "pad: value"),
                       (lambda: kiln.fuse(lambda x: x * 2**1100)(floats), "mul"),
                       (lambda: kiln.ops.rms_norm(floats, floats, eps=2**1100), "rms_norm: eps")]:
        with pytest.raises(bad, match=rf"^{name}: (a negative|an) integer of \d+ bits "
                           r"\(magnitude 2\*\*\d+ or more\) is past every dtype's range"):
            call()
    assert (floats + 2**1023).numpy()[0] == np.inf  # rounds to float32 as numpy does
    # Complex numbers, dates and durations are no operands: a TypeError, not a
    # numpy array made from the tensor.
    for other in (np.complex64(1), np.complex128(2), 1j, np.timedelta64(1, "s"),
                  np.datetime64("2020-01-01")):
        for call in (lambda: floats + other, lambda: floats * other, lambda: floats - other):
            with pytest.raises(TypeError, match=f"a kiln.Tensor takes no {type(other).__name__} "
                               "operand"):
                call()
        with pytest.raises(TypeError, match="==: cannot compare a kiln.Tensor with"):
            floats == other  # noqa: B015
        with pytest.raises(kiln.InvalidArgument, match="kiln.fuse: add of a"):
            kiln.fuse(lambda x: x + other)(floats)


def test_astype_and_method_flags_refuse_other_values(device):
    t = kiln.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    for dtype, message in [(None, "astype: dtype None is not a dtype"),
                           (object(), "astype: dtype <object .*> is not a dtype"),
                           (float, "astype: dtype float64 is not one kiln casts to; the dtypes "
                                   "are float32, float16, int32, uint32, int8, uint8 and bool"),
                           ("int64", "astype: dtype int64 is not one kiln casts to")]:
        with pytest.raises(kiln.InvalidArgument, match=message):
            t.astype(dtype)
    assert t.astype(np.int32).dtype == np.int32
    for call, flag in [(lambda: t.sum(axis=0, keepdims="no"), "reduce sum: keepdims"),
                       (lambda: t.max(keepdims=1), "reduce max: keepdims"),
                       (lambda: t.argmax(0, keepdims="yes"), "argmax: keepdims"),
                       (lambda: t.argmin(keepdims=None), "argmin: keepdims")]:
        with pytest.raises(kiln.ArgumentTypeError, match=f"{flag} must be a bool"):
            call()
    assert t.argmax(0, keepdims=np.True_).shape == (1, 3)


def test_empty_tensors_check_dtypes(device):
    empty_int = kiln.tensor(np.zeros((0, 3), np.int32), device)
    empty_float = kiln.tensor(np.zeros((0, 3), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="exp takes f32 or f16"):
        kiln.ops.exp(empty_int)
    with pytest.raises(kiln.InvalidArgument, match="bitwise_xor takes i32"):
        empty_float ^ empty_float  # noqa: B018
    with pytest.raises(kiln.InvalidArgument, match="mean takes f32 or f16"):
        kiln.ops.mean(empty_int)
    with pytest.raises(kiln.InvalidArgument, match="takes f32 or f16"):
        kiln.ops.elementwise_chain(empty_int, ["exp"])
    assert (empty_float < 1).numpy().dtype == np.bool_
    assert (empty_int + 1).numpy().shape == (0, 3)


def test_numpy_methods(device, rng):
    x = rng.standard_normal((5, 7, 33)).astype(np.float32)
    t = kiln.tensor(x, device)
    for name in ("sum", "mean", "prod", "max", "min"):
        for axis in (None, 1, (0, 2)):
            np.testing.assert_allclose(getattr(t, name)(axis=axis).numpy(),
                                       getattr(x, name)(axis=axis), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(t.sum(axis=2, keepdims=True).numpy(), x.sum(2, keepdims=True),
                               rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(t.argmax(axis=1).numpy(), x.argmax(axis=1))
    np.testing.assert_array_equal(t.argmin().numpy(), x.argmin())
    # dtype= casts each element before the sum, as numpy does.
    halves = np.array([1.5, 1.5, 2.5, -1.5], np.float32)
    h = kiln.tensor(halves, device)
    for name in ("sum", "prod"):
        got = getattr(h, name)(dtype="int32").numpy()
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, getattr(halves, name)(dtype=np.int32))
    # mean's dtype too: an f16 tensor's f32 mean sums in f32, an int32
    # tensor's is its float mean.
    pair = np.array([1.0, 1.0009765625], np.float16)
    if device.has_feature("shader-f16"):
        got = kiln.tensor(pair, device).mean(dtype="float32").numpy()
        assert got.dtype == np.float32
        assert got == pair.mean(dtype=np.float32)  # 1.00048828125, not f16's 1.0
    ints = np.array([1, 2, 7], np.int32)
    np.testing.assert_allclose(kiln.tensor(ints, device).mean(dtype="float32").numpy(),
                               ints.mean(dtype=np.float32), rtol=1e-6)
    np.testing.assert_array_equal(t.reshape(35, 33).numpy(), x.reshape(35, 33))
    np.testing.assert_array_equal(t.reshape((33, -1)).numpy(), x.reshape((33, -1)))
    np.testing.assert_array_equal(t.transpose(2, 0, 1).numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.transpose().numpy(), x.transpose())
    np.testing.assert_array_equal(t.T.numpy(), x.T)
    np.testing.assert_array_equal(t.flatten().numpy(), x.flatten())
    np.testing.assert_array_equal(t.clip(-0.5, 0.5).numpy(), x.clip(-0.5, 0.5))


def test_numpy_keywords_of_methods(device, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = kiln.tensor(a, device)
    np.testing.assert_array_equal(t.transpose(axes=(1, 0)).numpy(), a.T)
    np.testing.assert_array_equal(np.transpose(t, axes=(1, 0)).numpy(), a.T)
    np.testing.assert_array_equal(t.reshape((4, 3), order="C").numpy(), a.reshape((4, 3)))
    assert t.astype(np.float32, copy=False) is t
    assert t.astype(np.float32) is not t
    np.testing.assert_array_equal(t.astype("int32", copy=False).numpy(), a.astype(np.int32))
    with pytest.raises(kiln.ArgumentTypeError, match="order='C' only"):
        t.reshape(12, order="F")
    with pytest.raises(TypeError, match="the axes given twice"):
        t.transpose((1, 0), axes=(1, 0))
    for call, name in ((lambda: np.max(t, initial=0), "Tensor.max"),
                       (lambda: t.sum(where=True), "Tensor.sum"),
                       (lambda: t.transpose(bogus=1), "Tensor.transpose")):
        with pytest.raises(TypeError, match=name + r"\(\) got an unexpected keyword argument"):
            call()


def test_numpy_functions_dispatch_to_the_methods(device, rng):
    # np.argmax / np.argmin / np.clip pass out=None: the methods take it, so
    # the work runs on the device and the result is a tensor.
    a = rng.standard_normal((4, 9)).astype(np.float32)
    t = kiln.tensor(a, device)
    for got, want in ((np.argmax(t), np.argmax(a)), (np.argmin(t, axis=1), np.argmin(a, axis=1)),
                      (np.argmax(t, axis=0, keepdims=True), np.argmax(a, axis=0, keepdims=True)),
                      (np.clip(t, -0.5, 0.5), np.clip(a, -0.5, 0.5)),
                      (np.clip(t, -0.5, None), np.clip(a, -0.5, None))):
        assert isinstance(got, kiln.Tensor)
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(t.flatten("C").numpy(), a.flatten("C"))
    for call, name in ((lambda: t.argmin(out=np.zeros(4)), "Tensor.argmin: kiln tensors take no out="),
                       (lambda: t.clip(0, 1, out=np.zeros(1)), "Tensor.clip: kiln tensors take no out="),
                       (lambda: t.argmax(bogus=1), r"Tensor.argmax\(\) got an unexpected keyword"),
                       (lambda: t.clip(a_min=0), r"Tensor.clip\(\) got an unexpected keyword"),
                       (lambda: t.astype("int32", casting="unsafe"),
                        r"Tensor.astype\(\) got an unexpected keyword argument 'casting'"),
                       (lambda: t.reshape(shape=(36,)), r"Tensor.reshape\(\) got an unexpected keyword"),
                       (lambda: t.flatten("F"), "Tensor.flatten: kiln tensors are row-major")):
        with pytest.raises(TypeError, match=name):
            call()


def test_sum_and_prod_as_bools_are_logical(device):
    # numpy adds bools as or and multiplies them as and.
    a = np.array([[1.5, -2.5, 0.0], [0.5, 3.0, -1.0], [0.0, 0.0, 0.0]], np.float32)
    t = kiln.tensor(a, device)
    for name in ("sum", "prod"):
        for axis in (None, 0, 1):
            got = getattr(t, name)(axis=axis, dtype=bool).numpy()
            want = getattr(a, name)(axis=axis, dtype=bool)
            assert got.dtype == np.bool_, (name, axis)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} axis={axis}")
    b = kiln.tensor(a > 0, device)
    np.testing.assert_array_equal(np.sum(b, axis=0, dtype=bool).numpy(),
                                  np.sum(a > 0, axis=0, dtype=bool))
    empty = kiln.tensor(np.zeros((0, 3), np.float32), device)
    np.testing.assert_array_equal(empty.sum(axis=0, dtype=bool).numpy(), [False] * 3)
    np.testing.assert_array_equal(empty.prod(axis=0, dtype=bool).numpy(), [True] * 3)


def test_where_and_clip_of_bools_and_ints(device):
    c = np.array([True, False, True])
    i = np.array([5, 6, -7], np.int32)
    for args in ((c, c, i), (c, i, c), (c, c, c)):
        got = kiln.ops.where(*[kiln.tensor(x, device) for x in args])
        want = np.where(*args)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(kiln.InvalidArgument, match="where: a is bool and b float32"):
        kiln.ops.where(kiln.tensor(c, device), kiln.tensor(c, device),
                       kiln.tensor(np.ones(3, np.float32), device))
    t = kiln.tensor(i, device)
    # A float bound clips in float32 (torch's rule; numpy's float64 kiln has not).
    for got, want in ((t.clip(0.5), i.clip(0.5)), (t.clip(None, 0.5), i.clip(None, 0.5)),
                      (t.clip(0, 1.5), i.clip(0, 1.5))):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(t.clip(-6, 5).numpy(), i.clip(-6, 5))


def test_float_numbers_with_integer_tensors_compute_in_float32(device, rng):
    # torch's rule (numpy's would be float64, which kiln has not): the
    # result is float32, never an int32 that wraps or drops the fraction.
    i = rng.integers(-50, 50, 33).astype(np.int32)
    b = i > 0
    ti, tb = kiln.tensor(i, device), kiln.tensor(b, device)
    f = i.astype(np.float32)
    for got, want in ((ti * 1e9, f * np.float32(1e9)), (ti + 2147483647.0, f + np.float32(2**31)),
                      (ti * 2.0, f * 2), (2.5 - ti, 2.5 - f), (ti / 4.0, f / 4),
                      (ti ** 2.0, f ** 2), (ti // 2.5, f // np.float32(2.5)),
                      (tb + np.float32(1), b.astype(np.float32) + 1),
                      (kiln.ops.maximum(ti, 0.5), np.maximum(f, 0.5))):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.numpy(), want.astype(np.float32), rtol=1e-6)
    fused = kiln.fuse(lambda a: a * 0.5 + 1)(ti)
    assert fused.dtype == np.float32
    np.testing.assert_allclose(fused.numpy(), f * 0.5 + 1, rtol=1e-6)
    # An int stays int32 (wrapping, as numpy's), and comparisons are exact.
    assert (ti * 2).dtype == np.int32
    np.testing.assert_array_equal((ti < 2.0).numpy(), i < 2)


def test_true_division_of_integers_by_halves_is_half(device, rng):
    require_feature(device, "shader-f16")
    h = rng.uniform(1, 4, 33).astype(np.float16)
    i = rng.integers(1, 9, 33).astype(np.int32) * rng.choice([-1, 1], 33).astype(np.int32)
    for got, want in ((kiln.tensor(h, device) / kiln.tensor(i, device), h / i.astype(np.float16)),
                      (kiln.tensor(i, device) / kiln.tensor(h, device), i.astype(np.float16) / h)):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64),
                                   rtol=2e-3)


def test_numpy_ufuncs_run_on_the_device(device, rng):
    a = rng.uniform(0.5, 2, (3, 5)).astype(np.float32)
    t = kiln.tensor(a, device)
    for ufunc in (np.exp, np.sqrt, np.negative, np.square, np.isnan, np.rint):
        got = ufunc(t)
        assert isinstance(got, kiln.Tensor) and got.device is device
        _same(got, ufunc(a))
    for ufunc in (np.add, np.divide, np.maximum, np.less, np.power, np.remainder):
        _same(ufunc(t, a[0]), ufunc(a, a[0]))
        _same(ufunc(a[0], t), ufunc(a[0], a))  # a numpy array first
    _same(np.matmul(a, kiln.tensor(a.T, device)), a @ a.T)
    # Integers and bools: the float math in float32 (numpy's float64 or
    # float16), floor, ceil and trunc the integers themselves.
    ints = np.array([[0, 1, 4, 9, -7]], np.int32)
    for dtype in (np.int32, np.uint32, np.int8, np.uint8, np.bool_):
        v = np.abs(ints).astype(dtype)
        tv = kiln.tensor(v, device)
        for ufunc in (np.sqrt, np.exp, np.isnan, np.isfinite):
            got = ufunc(tv)
            want = ufunc(v.astype(np.float32))
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
        for ufunc in (np.floor, np.trunc):
            got = ufunc(tv)
            assert got.dtype == v.dtype
            np.testing.assert_array_equal(got.numpy(), ufunc(v))
    # Other ufuncs, methods and keywords compute on the host: arrays.
    for got, want in ((np.arctan(t), np.arctan(a)), (np.add.reduce(t), np.add.reduce(a)),
                      (np.add(t, 1, dtype=np.float64), a + 1.0)):
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # arr += t updates the array in place, as numpy's.
    arr = np.ones_like(a)
    same_arr = arr
    arr += t
    assert arr is same_arr
    np.testing.assert_allclose(arr, 1 + a, rtol=1e-6)
    with pytest.raises(TypeError, match="numpy's add with out= a kiln.Tensor"):
        np.add(t, t, out=t)
    with pytest.raises(TypeError, match="numpy's add.at on a kiln.Tensor"):
        np.add.at(t, (0, 0), 1.0)
    with pytest.raises(TypeError, match="takes no complex operand"):
        np.add(t, 1j)
    # Lists compute on the host; another array type's protocol decides.
    assert isinstance(np.add(t[0], [1.0] * 5), np.ndarray)

    class Other:
        def __array_ufunc__(self, *args, **kwargs):
            return "handled"
    assert np.add(t, Other()) == "handled"
    # A float16 array or an int64 one is no reason to narrow: refused as by add.
    ti = kiln.tensor(np.array([1, 2], np.int32), device)
    with pytest.raises(kiln.InvalidArgument, match="arrays of int64 are not supported"):
        np.divide(ti, np.array([3, 3], np.int64))
    with pytest.raises((kiln.InvalidArgument, kiln.Unavailable),
                       match="dtype mismatch|no shader-f16"):  # (the device may lack float16)
        ti / np.array([2, 2], np.float16)
    # The methods numpy's results are used through.
    assert bool(np.isnan(t).any()) is False and bool(np.isfinite(t).all()) is True
    mask = t > 1.0
    np.testing.assert_array_equal(mask.any(axis=1).numpy(), (a > 1.0).any(axis=1))
    np.testing.assert_array_equal(mask.all(axis=0, keepdims=True).numpy(),
                                  (a > 1.0).all(axis=0, keepdims=True))
    empty = kiln.tensor(np.zeros((0, 3), np.float32), device)
    assert empty.any(axis=0).numpy().tolist() == [False] * 3 and bool(empty.all())
    assert t[1, 2].item() == a[1, 2].item() and t.tolist() == a.tolist()
    copied = t.copy()
    assert copied is not t and copied.tolist() == a.tolist()
    with pytest.raises(ValueError, match="one element"):
        t.item()
