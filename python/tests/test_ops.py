import math

import numpy as np
import pytest

import kiln
from conftest import require_feature

_erf = np.vectorize(math.erf, otypes=[np.float64])

NUMPY_UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "log": np.log,
    "log2": np.log2, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin,
    "cos": np.cos, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": _erf,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "relu": lambda x: np.where(x > 0, x, 0), "gelu": lambda x: x / 2 * (1 + _erf(x / np.sqrt(2))),
}
NUMPY_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "max": np.maximum, "min": np.minimum, "pow": np.power,
}
POSITIVE = {"log", "log2", "sqrt", "rsqrt"}


def _close(got, want, tol=2e-5):
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape
    err = np.abs(got.astype(np.float64) - want) / (1 + np.abs(want))
    assert np.nanmax(err, initial=0) <= tol, f"max error {np.nanmax(err)}"


def test_every_operator_has_a_function():
    assert set(kiln.ops.UNARY_OPS) == set(NUMPY_UNARY)
    assert set(kiln.ops.BINARY_OPS) == set(NUMPY_BINARY)
    assert set(kiln.ops.REDUCE_OPS) == {"sum", "mean", "max", "min", "prod"}


@pytest.mark.parametrize("op", sorted(NUMPY_UNARY))
@pytest.mark.parametrize("shape", [(1,), (7, 33), (1000,), (5, 1, 33, 7)], ids=str)
def test_unary(device, rng, op, shape):
    x = rng.uniform(-4, 4, shape).astype(np.float32)
    if op in POSITIVE:
        x = np.abs(x) + 0.01
    if op in ("round", "floor", "ceil", "trunc"):
        x = np.round(x * 8) / 8 + 1 / 32  # keep away from ties and edges
    y = getattr(kiln.ops, op)(kiln.tensor(x, device))
    _close(y.numpy(), NUMPY_UNARY[op](x.astype(np.float64)), 2e-5 if op != "erf" else 1e-4)


@pytest.mark.parametrize("op", sorted(NUMPY_BINARY))
@pytest.mark.parametrize("shapes", [((7, 1), (1, 33)), ((33,), (5, 33)), ((1000,), (1000,)),
                                    ((1,), (7,)), ((7,), (1,)), ((3, 1, 5, 1), (4, 1, 7))],
                         ids=str)
def test_binary_broadcasting(device, rng, op, shapes):
    a = rng.uniform(-2, 2, shapes[0]).astype(np.float32)
    b = rng.uniform(-2, 2, shapes[1]).astype(np.float32)
    if op == "pow":
        a = np.abs(a) + 0.1
    if op == "div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    c = getattr(kiln.ops, op)(kiln.tensor(a, device), kiln.tensor(b, device))
    _close(c.numpy(), NUMPY_BINARY[op](a.astype(np.float64), b), 1e-5 if op != "pow" else 1e-4)


def test_number_and_numpy_operands(device, rng):
    a = rng.standard_normal((7, 33)).astype(np.float32)
    x = kiln.tensor(a, device)
    _close(kiln.ops.add(x, 2.5).numpy(), a + 2.5)
    _close(kiln.ops.sub(1.0, x).numpy(), 1.0 - a)
    b = rng.standard_normal((33,)).astype(np.float32)
    _close(kiln.ops.mul(x, b).numpy(), a * b)


def test_chain(device, rng):
    a = rng.standard_normal((5, 33)).astype(np.float32)
    b = rng.standard_normal((33,)).astype(np.float32)
    c = rng.standard_normal((5, 1)).astype(np.float32)
    y = kiln.ops.elementwise_chain(kiln.tensor(a, device), [
        ("add", kiln.tensor(b, device)), ("mul", kiln.tensor(c, device)), "relu", "tanh",
        ("add", 1.5), ("div", 2.0, True)])
    want = 2.0 / (np.tanh(np.maximum((a + b) * c, 0)) + 1.5)  # well conditioned
    _close(y.numpy(), want, 1e-4)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (33, 1000), (1000, 7), (1, 1000)], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(device, rng, op, shape, keepdims):
    a = rng.uniform(-1, 1, shape).astype(np.float32)
    if op == "prod":
        a = rng.uniform(0.9, 1.1, shape).astype(np.float32)
    y = kiln.ops.reduce(op, kiln.tensor(a, device), keepdims=keepdims)
    want = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
            "prod": np.prod}[op](a.astype(np.float64), axis=1, keepdims=keepdims)
    _close(y.numpy(), want, 1e-4)


def test_reduction_functions(device, rng):
    a = rng.uniform(-1, 1, (7, 33)).astype(np.float32)
    x = kiln.tensor(a, device)
    _close(kiln.ops.sum(x).numpy(), a.sum(1), 1e-5)
    _close(kiln.ops.mean(x, keepdims=True).numpy(), a.mean(1, keepdims=True), 1e-5)
    _close(kiln.ops.amax(x).numpy(), a.max(1))
    _close(kiln.ops.amin(x).numpy(), a.min(1))


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (33, 1000), (1000, 7)], ids=str)
def test_softmax(device, rng, shape):
    a = rng.uniform(-50, 100, shape).astype(np.float32)
    y = kiln.ops.softmax(kiln.tensor(a, device)).numpy()
    e = np.exp(a - a.max(1, keepdims=True))
    _close(y, e / e.sum(1, keepdims=True), 1e-5)
    np.testing.assert_allclose(y.sum(1), 1, rtol=1e-4)


def test_float16(device, rng):
    require_feature(device, "shader-f16")
    a = rng.standard_normal((7, 33)).astype(np.float16)
    b = rng.standard_normal((33,)).astype(np.float16)
    c = kiln.ops.add(kiln.tensor(a, device), kiln.tensor(b, device)).numpy()
    assert c.dtype == np.float16
    np.testing.assert_allclose(c, a + b, rtol=1e-3, atol=1e-3)
    s = kiln.ops.sum(kiln.tensor(a, device)).numpy()
    np.testing.assert_allclose(s, a.astype(np.float32).sum(1), rtol=1e-2, atol=1e-2)


def test_edge_values(device):
    a = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -1.0, 2.0], np.float32)
    x = kiln.tensor(a, device)
    neg = kiln.ops.neg(x).numpy()
    assert np.isnan(neg[0]) and np.signbit(neg[2]) and not np.signbit(neg[1])
    np.testing.assert_array_equal(neg[3:], -a[3:])
    relu = kiln.ops.relu(x).numpy()
    np.testing.assert_array_equal(relu, [0, 0, 0, np.inf, 0, 0, 2])  # NaN becomes 0
    s = kiln.ops.add(x, x).numpy()
    assert np.isnan(s[0]) and s[3] == np.inf and s[4] == -np.inf and np.signbit(s[1])
    ab = kiln.ops.abs(x).numpy()
    assert not np.signbit(ab[1]) and ab[4] == np.inf


def test_kernels_are_cached_per_shape_and_dtype(device, rng):
    a = kiln.tensor(rng.standard_normal((3, 11)).astype(np.float32), device)
    kiln.ops.exp(a)
    n = len(device._cache)
    for _ in range(3):
        kiln.ops.exp(a)
    assert len(device._cache) == n
    kiln.ops.exp(kiln.tensor(rng.standard_normal((3, 12)).astype(np.float32), device))
    assert len(device._cache) == n + 1


def test_errors(device):
    f32 = kiln.tensor(np.ones((7, 2), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="do not broadcast"):
        kiln.ops.add(f32, kiln.tensor(np.ones((1, 33), np.float32), device))
    # f32 with f16: a dtype mismatch, or on a device without shader-f16 that first.
    with pytest.raises(kiln.InvalidArgument, match="dtype mismatch|no shader-f16"):
        kiln.ops.add(f32, kiln.tensor(np.ones((7, 2), np.float16), device))
    with pytest.raises(kiln.InvalidArgument, match="i32|int32|dtypes"):
        kiln.ops.exp(kiln.tensor(np.ones(3, np.int32), device))
    with pytest.raises(kiln.InvalidArgument, match="unknown elementwise op 'expp'"):
        kiln.ops.elementwise("expp", f32)
    with pytest.raises(kiln.InvalidArgument, match="rank"):
        kiln.ops.exp(kiln.tensor(np.ones((1, 1, 1, 1, 2), np.float32), device))
    with pytest.raises(kiln.InvalidArgument):
        kiln.ops.sum(kiln.tensor(np.ones(5, np.float32), device))
    with pytest.raises(kiln.InvalidArgument, match="kiln.Tensor or numpy"):
        kiln.ops.exp([1.0, 2.0])
    with pytest.raises(kiln.InvalidArgument, match="takes 2 inputs"):
        kiln.ops.elementwise("add", f32)


def test_tensors_of_two_devices_do_not_mix(rng):
    a = kiln.Device(impl="wgpu", backend="vulkan")
    b = kiln.Device(impl="dawn", backend="vulkan")
    x = kiln.tensor(np.ones(4, np.float32), a)
    y = kiln.tensor(np.ones(4, np.float32), b)
    with pytest.raises(kiln.InvalidArgument, match="another device"):
        kiln.ops.add(x, y)
