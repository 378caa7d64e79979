import numpy as np
import pytest

import kiln
from conftest import require_feature

SHAPES = [(1,), (7,), (33,), (1000,), (7, 33), (5, 1, 33, 7), ()]


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32", "int8", "uint8",
                                   "bool"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip(device, rng, dtype, shape):
    a = _random(rng, shape, dtype)
    t = kiln.tensor(a, device)
    assert t.shape == shape
    assert t.dtype == np.dtype(dtype)
    assert t.device is device or t.device.impl == device.impl
    out = t.numpy()
    assert out.dtype == np.dtype(dtype) and out.shape == shape
    np.testing.assert_array_equal(out, a)


def test_non_contiguous_input_is_copied_in_order(device, rng):
    base = rng.standard_normal((33, 40)).astype(np.float32)
    for view in (base.T, base[::3, 1::2], base[:, 7], np.flip(base, 0)):
        np.testing.assert_array_equal(kiln.tensor(view, device).numpy(), view)


def test_big_endian_input_is_converted(device, rng):
    for dtype in (">f4", ">i4", ">u4", ">f2"):
        a = (rng.standard_normal(37) * 100).astype(dtype)
        t = kiln.tensor(a, device)
        assert t.dtype == np.dtype(dtype).newbyteorder("=")
        np.testing.assert_array_equal(t.numpy(), a)


def test_edge_values_survive_bit_for_bit(device):
    a = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-45, 3.4e38], np.float32)
    out = kiln.tensor(a, device).numpy()
    assert out.tobytes() == a.tobytes()


def test_lists_and_numbers():
    t = kiln.tensor([[1.5, 2.5], [3.0, 4.0]])
    assert t.dtype == np.float32 and t.shape == (2, 2)
    assert kiln.tensor([1, 2, 3]).dtype == np.int32


def test_python_numbers_that_int32_or_float32_cannot_hold_are_errors(device):
    for ints in ([1, 2**31], [-2**31 - 1], [2**63], [1, 2**63], [1, 2**64]):
        with pytest.raises(kiln.InvalidArgument, match="int32 range|beyond 64 bits"):
            kiln.tensor(ints, device)
    for floats in ([1e300], [0.5, -3.4028236e38]):
        with pytest.raises(kiln.InvalidArgument, match="beyond float32's range"):
            kiln.tensor(floats, device)
    # What float32 holds (rounded), and inf and NaN as given, are taken.
    edge = [3.4028235e38, -1e38, 1e-50, float("inf"), float("nan"), -0.0, 2.0**63]
    out = kiln.tensor(edge, device).numpy()
    np.testing.assert_array_equal(out, np.array(edge, np.float32))
    assert np.signbit(out[5])
    assert kiln.tensor([-2**31, 2**31 - 1, True], device).numpy().tolist() == \
        [-2**31, 2**31 - 1, 1]
    # Data that is not numbers of one shape: named.
    for data, error, message in [
            ([[1, 2], [3]], kiln.InvalidArgument, r"not an array of numbers of one shape \(ragged "
                                                  r"lists\?\)"),
            (None, kiln.ArgumentTypeError, "data must be a numpy array, a number or \\(nested\\) "
                                           "lists of numbers; got NoneType"),
            ({}, kiln.ArgumentTypeError, "got dict"),
            ([1.0, None], kiln.ArgumentTypeError, "the data holds a NoneType, not only numbers")]:
        with pytest.raises(error, match=message):
            kiln.tensor(data, device)
    # An array says its own dtype: a float32 array's inf is data.
    assert np.isinf(kiln.tensor(np.full(2, np.inf, np.float32), device).numpy()).all()


def test_an_explicit_dtype_converts_by_the_same_rules(device):
    # Values the dtype holds are taken (floats rounded to a float dtype).
    for data, dtype, want in [
            ([1.0, 2.5, -0.0], "float16", np.array([1.0, 2.5, -0.0], np.float16)),
            (np.array([1.5, 1e-40], np.float64), "float32", np.array([1.5, 1e-40], np.float32)),
            ([3, -4], "int8", np.array([3, -4], np.int8)),
            ([1.0, -2.0], "int32", np.array([1, -2], np.int32)),
            (np.int64([2**31 - 1, -2**31]), "i32", np.array([2**31 - 1, -2**31], np.int32)),
            ([2, 0], bool, np.array([True, False])),
            (np.float32([2147483520.0]), "int32", np.array([2147483520], np.int32)),
            ([2**100], "float32", np.array([2.0**100], np.float32)),
            ([1.5], ">f4", np.array([1.5], np.float32)),
            (np.float64(-0.0), "float32", np.array(-0.0, np.float32)),  # 0-d
            (np.zeros((0, 3)), "int8", np.zeros((0, 3), np.int8)),  # empty
            ([True, False], "float32", np.array([1, 0], np.float32)),
            (np.array([np.nan, np.inf]), "float32", np.array([np.nan, np.inf], np.float32))]:
        t = kiln.tensor(data, device, dtype=dtype)
        assert t.dtype == want.dtype, (data, dtype)
        np.testing.assert_array_equal(t.numpy(), want)
        assert np.array_equal(np.signbit(t.numpy()), np.signbit(want))
    # What it cannot hold is an error naming the value, never inf or a
    # truncated or wrapped value.
    for data, dtype, error, message in [
            ([1e39], "float32", kiln.InvalidArgument, r"1e\+39 is beyond float32's range"),
            ([1.0, 70000.0], "float16", kiln.InvalidArgument, "70000.0 is beyond float16's range"),
            ([1.7, -2.9], "int32", kiln.InvalidArgument, "1.7 is not an int32 value"),
            ([float("nan")], "int32", kiln.InvalidArgument, "nan is not an int32 value"),
            (np.float32([300.0]), "int8", kiln.InvalidArgument, "300.0 is beyond int8's range"),
            ([2**40], "int32", kiln.InvalidArgument, "1099511627776 is beyond int32's range"),
            ([-1], "uint32", kiln.InvalidArgument, "-1 is beyond uint32's range"),
            # (float32's 2^31 and 2^32 are compared exactly, not as 2^31 - 1 rounded)
            (np.float32([2**31]), "int32", kiln.InvalidArgument, "2147483648.0 is beyond int32"),
            (np.float32([2**32]), "uint32", kiln.InvalidArgument, "4294967296.0 is beyond uint32"),
            (np.uint32([4000000000]), "int32", kiln.InvalidArgument, "beyond int32's range"),
            (["1.5"], "float32", kiln.InvalidArgument, "is not a number type"),
            ([1j], "float32", kiln.InvalidArgument, "complex128 is not a number type"),
            ([1.0], "float64", kiln.InvalidArgument, "dtype float64 is not supported"),
            ([1.0], "nope", kiln.ArgumentTypeError, "'nope' is not a dtype"),
            ([[1], [2, 3]], "float32", kiln.InvalidArgument, "ragged lists"),
            ([None], "float32", kiln.ArgumentTypeError, "holds a NoneType"),
            (np.float64(1e39), "float32", kiln.InvalidArgument, r"1e\+39 is beyond"),  # 0-d
            (np.float32(-0.5), "int32", kiln.InvalidArgument, "-0.5 is not an int32 value")]:
        with pytest.raises(error, match=message):
            kiln.tensor(data, device, dtype=dtype)


def test_a_tensor_converts_to_numpy_only_by_copy(device):
    t = kiln.tensor(np.arange(4, dtype=np.float32), device)
    assert np.array(t).tolist() == [0, 1, 2, 3]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="always a copy"):
        np.array(t, copy=False)


def test_wrong_shapes_devices_and_dtypes_of_tensor_and_empty(device):
    for shape in (None, "3", 2.5, True, {3: 1}):
        with pytest.raises(kiln.ArgumentTypeError, match="kiln.empty: the shape"):
            kiln.empty(shape, "float32", device)
    with pytest.raises(kiln.ArgumentTypeError, match="shape entry 1"):
        kiln.empty((3, None), "float32", device)
    with pytest.raises(kiln.ArgumentTypeError, match="device must be a kiln.Device"):
        kiln.tensor(np.ones(3, np.float32), device="dawn")
    with pytest.raises(kiln.ArgumentTypeError, match="device must be a kiln.Device"):
        kiln.empty((3,), "float32", 0)
    with pytest.raises(kiln.ArgumentTypeError, match="not a dtype"):
        kiln.empty((3,), object(), device)
    # An empty shape whose other dimensions overflow is refused, as numpy does.
    with pytest.raises(kiln.InvalidArgument, match="counting only its nonzero dimensions"):
        kiln.empty((0, 2**62, 2**62), "float32", device)
    big_empty = kiln.empty((0, 2**24, 2**24), "float32", device)
    assert big_empty.numpy().shape == (0, 2**24, 2**24)
    # dtype None is kiln's default, float32 (numpy's None would be float64).
    assert kiln.empty((3,), None, device).dtype == np.float32


def test_iteration_and_len_as_numpy(device):
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    rows = list(kiln.tensor(a, device))
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(np.stack([r.numpy() for r in rows]), a)
    z = kiln.tensor(np.float32(5), device)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(z)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(z)


def test_empty_has_shape_and_dtype(device):
    t = kiln.empty((7, 33), "float16", device)
    assert t.shape == (7, 33) and t.dtype == np.float16
    assert kiln.empty(5, np.int32, device).shape == (5,)
    assert kiln.empty((0, 3), "f32", device).numpy().shape == (0, 3)


def test_unsupported_dtypes_are_clear_errors(device):
    with pytest.raises(kiln.InvalidArgument, match="float64"):
        kiln.tensor(np.zeros(3), device)
    with pytest.raises(kiln.InvalidArgument, match="int64"):
        kiln.tensor(np.zeros(3, np.int64), device)
    with pytest.raises(kiln.InvalidArgument, match="complex"):
        kiln.tensor(np.zeros(3, np.complex64), device)
    with pytest.raises(kiln.InvalidArgument, match="not supported"):
        kiln.empty((3,), "float64", device)
    with pytest.raises(kiln.InvalidArgument, match="negative"):
        kiln.empty((3, -1), "float32", device)


def test_error_hierarchy():
    assert issubclass(kiln.InvalidArgument, kiln.Error)
    assert issubclass(kiln.InvalidArgument, ValueError)
    assert issubclass(kiln.CompileError, kiln.Error)
    assert issubclass(kiln.OutOfMemory, MemoryError)
    assert kiln.FeatureMissing is kiln.Unavailable
    for name in ("DeviceLost", "DataLoss", "Unimplemented", "InternalError",
                 "FailedPrecondition", "DeadlineExceeded"):
        assert issubclass(getattr(kiln, name), kiln.Error)


def test_copies_masked_arrays_and_in_place_operators(device):
    import copy
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = kiln.tensor(a, device)
    for c in (copy.copy(t), copy.deepcopy([t])[0]):
        assert c is not t and c.dtype == t.dtype
        np.testing.assert_array_equal(c.numpy(), a)
    u = kiln.tensor(np.arange(3, dtype=np.uint32), device)
    np.testing.assert_array_equal(copy.copy(u).numpy(), np.arange(3, dtype=np.uint32))
    np.testing.assert_array_equal(copy.copy(kiln.tensor(np.array([True, False]), device)).numpy(),
                                  [True, False])
    plus = +u
    assert plus is not u and plus.dtype == np.uint32
    np.testing.assert_array_equal(plus.numpy(), np.arange(3, dtype=np.uint32))
    bytes_ = kiln.tensor(np.arange(5, dtype=np.uint8), device)
    np.testing.assert_array_equal((+bytes_).numpy(), np.arange(5, dtype=np.uint8))
    masked = np.ma.masked_array(np.array([1.0, 2.0], np.float32), mask=[0, 1])
    for call in (lambda: kiln.tensor(masked, device), lambda: t[0, :2] + masked):
        with pytest.raises(kiln.InvalidArgument, match="masked array"):
            call()
    # t += 1 makes a new tensor; the old one keeps its values.
    alias = t
    t += 1
    np.testing.assert_array_equal(alias.numpy(), a)
    np.testing.assert_array_equal(t.numpy(), a + 1)


def test_integers_beyond_64_bits_are_named(device):
    for data in (2**100, [2**100], [[1, 2**70]]):
        with pytest.raises(kiln.InvalidArgument, match="integers out of the int32 range"):
            kiln.tensor(data, device)
    # Among floats they are floats (a list of floats is float32).
    got = kiln.tensor([1.5, 2**70], device).numpy()
    np.testing.assert_array_equal(got, np.array([1.5, 2.0**70], np.float32))
    with pytest.raises(kiln.InvalidArgument, match="beyond float32's range"):
        kiln.tensor([1.5, 2**200], device)


def test_contains_and_astype_to_the_same_dtype(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = kiln.tensor(a, device)
    assert (4.0 in t) is True and (9 in t) is False and (np.nan in t) is False
    assert (1 in kiln.tensor(np.zeros((0, 3), np.float32), device)) is False
    u = kiln.tensor(np.arange(3, dtype=np.uint32), device)
    c = u.astype(u.dtype)
    assert c is not u and c.dtype == np.uint32
    np.testing.assert_array_equal(c.numpy(), np.arange(3, dtype=np.uint32))
    assert u.astype("uint32", copy=False) is u


def test_contains_never_raises_for_values_no_element_equals(device):
    i = kiln.tensor(np.arange(4, dtype=np.int32), device)
    assert (2.5 in i) is False and (None in i) is False and (2**40 in i) is False
    assert (2.0 in i) is True and (3 in i) is True
    got = kiln.ops.clip(i, 0.5, 2)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), np.clip(np.arange(4), 0.5, 2).astype(np.float32))
    with pytest.raises(kiln.InvalidArgument, match="^clamp: the number 0.5 is not an int32"):
        kiln.ops.clamp(i, 0.5, 2)


def test_mean_with_an_integer_dtype_names_the_dtype_asked(device):
    t = kiln.tensor(np.ones(4, np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="^Tensor.mean: dtype int32: a mean is taken in "
                                                   "float32 or float16"):
        t.mean(dtype="int32")
    assert t.mean(dtype="float32").dtype == np.float32


def test_max_and_min_methods_take_numpys_positional_order(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = kiln.tensor(a, device)
    np.testing.assert_array_equal(t.max(1, None, True).numpy(), a.max(1, None, True))
    np.testing.assert_array_equal(t.min(0, None, False).numpy(), a.min(0, None, False))
    with pytest.raises(TypeError, match="Tensor.max.*dtype"):
        t.max(dtype="float32")
    with pytest.raises(TypeError, match="Tensor.min: kiln tensors take no out="):
        t.min(1, np.zeros(2, np.float32))


def test_tensors_of_rank_five_reshape_down(device):
    a = np.arange(64, dtype=np.float32).reshape(2, 2, 2, 2, 4)
    t = kiln.tensor(a, device)
    np.testing.assert_array_equal(t.reshape(-1).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(kiln.ops.reshape(t, (4, 16)).numpy(), a.reshape(4, 16))
    np.testing.assert_array_equal(t.reshape(2, 2, 2, 2, 2, 2).numpy(), a.reshape((2,) * 6))
    with pytest.raises(kiln.InvalidArgument, match=r"into shape \(2, -1, 5, 1, 1\)"):
        t.reshape(2, -1, 5, 1, 1)
