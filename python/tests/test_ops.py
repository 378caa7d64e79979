import copy
import math
import operator
import re
import warnings

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
    "relu": lambda x: np.maximum(x, 0), "gelu": lambda x: x / 2 * (1 + _erf(x / np.sqrt(2))),
    "sign": np.sign, "square": np.square, "reciprocal": np.reciprocal,
}
NUMPY_PREDICATE = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
NUMPY_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "floor_div": np.floor_divide, "floor_mod": np.mod,
    "max": np.maximum, "min": np.minimum, "pow": np.power,
}
POSITIVE = {"log", "log2", "sqrt", "rsqrt"}


def _wrap(v):
    return np.asarray(np.asarray(v, np.int64) & 0xFFFFFFFF, np.uint32).view(np.int32)


def _int_div(a, b):
    # Truncating division in exact int64 arithmetic, x / 0 = x; MIN / -1
    # wraps to MIN.
    a64, b64 = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    d = np.where(b64 == 0, 1, b64)
    return _wrap(np.where(b64 == 0, a64, np.sign(a64) * np.sign(d) * (np.abs(a64) // np.abs(d))))


def _int_floor(a, b):
    # floor_div and floor_mod, exact; x // 0 = x and x % 0 = 0.
    a64, b64 = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    d = np.where(b64 == 0, 1, b64)
    return _wrap(np.where(b64 == 0, a64, a64 // d)), _wrap(np.where(b64 == 0, 0, a64 % d))


# kiln's i32 arithmetic: wrapping, truncating division with x / 0 = x,
# shift amounts modulo 32, arithmetic shift right.
NUMPY_INT_UNARY = {
    "neg": lambda x: _wrap(-np.asarray(x, np.int64)),
    "abs": lambda x: _wrap(np.abs(np.asarray(x, np.int64))),
    "relu": lambda x: np.maximum(x, 0),
    "sign": np.sign, "square": lambda x: _wrap(np.asarray(x, np.int64) ** 2),
    "bitwise_not": np.invert,
    "popcount": lambda x: np.array([bin(int(v) & 0xFFFFFFFF).count("1") for v in np.ravel(x)],
                                   np.int32).reshape(np.shape(x)),
}
def _int_pow(a, b):
    # x ** e mod 2^32 for e >= 0; for e < 0 the truncation of 1 / x ** -e.
    a64, b64 = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    out = np.empty(a64.shape, np.int64)
    for i in np.ndindex(a64.shape):
        x, e = int(a64[i]), int(b64[i])
        out[i] = pow(x, e, 2**32) if e >= 0 else 1 if x == 1 else (-1 if e % 2 else 1) \
            if x == -1 else 0
    return _wrap(out)


NUMPY_INT_BINARY = {
    "add": lambda a, b: _wrap(np.int64(1) * a + b), "sub": lambda a, b: _wrap(np.int64(1) * a - b),
    "mul": lambda a, b: _wrap(np.asarray(a, np.int64) * b), "div": _int_div,
    "floor_div": lambda a, b: _int_floor(a, b)[0], "floor_mod": lambda a, b: _int_floor(a, b)[1],
    "max": np.maximum, "min": np.minimum, "pow": _int_pow,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "shift_left": lambda a, b: _wrap(np.asarray(a, np.int64) << (np.asarray(b) & 31)),
    "shift_right": lambda a, b: np.right_shift(a, np.asarray(b) & 31),
}
NUMPY_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                 "gt": np.greater, "ge": np.greater_equal}


def _close(got, want, tol=2e-5):
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN where the reference has none, or the reverse"
    err = np.abs(got.astype(np.float64)[~nan] - want[~nan]) / (1 + np.abs(want[~nan]))
    assert np.max(err, initial=0) <= tol, f"max error {np.max(err, initial=0)}"


def test_every_operator_has_a_function():
    assert set(kiln.ops.UNARY_OPS) == set(NUMPY_UNARY) | set(NUMPY_INT_UNARY) | \
        set(NUMPY_PREDICATE)
    assert set(kiln.ops.PREDICATE_OPS) == set(NUMPY_PREDICATE)
    assert set(kiln.ops.BINARY_OPS) == set(NUMPY_BINARY) | set(NUMPY_INT_BINARY)
    assert set(kiln.ops.COMPARE_OPS) == set(NUMPY_COMPARE)
    assert set(kiln.ops.TERNARY_OPS) == {"fma", "clamp"}
    assert set(kiln.ops.REDUCE_OPS) == {"sum", "mean", "max", "min", "prod"}
    assert set(kiln.ops.ARG_REDUCE_OPS) == {"argmax", "argmin"}
    for name in ("logical_and", "logical_or", "logical_xor", "logical_not"):
        assert callable(getattr(kiln.ops, name)), name
    for name in ("matmul", "matmul_int8", "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "softmax",
                 "log_softmax", "layer_norm", "rms_norm", "permute", "transpose", "reshape",
                 "concat", "slice", "gather", "pad", "where", "cast", "conv2d", "max_pool2d",
                 "avg_pool2d", "attention", "packed_attention"):
        assert callable(getattr(kiln.ops, name)), name


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


_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3.0, -0.25]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_sign_square_reciprocal_and_predicates_at_the_edges(device, rng, dtype):
    # numpy's, bit for bit where exact: sign(-0.0) is 0.0, sign(nan) nan;
    # the predicates give bool tensors; empty and 0-d tensors too.
    if dtype == "float16":
        require_feature(device, "shader-f16")
    big = np.finfo(dtype).max
    x = np.concatenate([_EDGES, [big, -big, np.finfo(dtype).tiny],
                        rng.uniform(-4, 4, 1000)]).astype(dtype)
    t = kiln.tensor(x, device)
    for name in ("sign", "square", "reciprocal", "isnan", "isinf", "isfinite"):
        with np.errstate(over="ignore", divide="ignore"):
            want = getattr(np, name)(x)
        for how, got in (("eager", getattr(kiln.ops, name)(t)),
                         ("fused", kiln.fuse(getattr(kiln.ops, name))(t))):
            got = got.numpy()
            assert got.dtype == want.dtype, (how, name)
            if name == "reciprocal":
                # Within WGSL's 2.5 ulp; 1 / +-0 and 1 / +-inf are infinite and
                # zero, their signs the device's, and a subnormal result (of
                # 1 / max) 0 where the device flushes subnormals (docs/ir.md,
                # "Numerics").
                sub = (want != 0) & (np.abs(want) < np.finfo(dtype).tiny)
                edge = ~np.isfinite(want) | (want == 0) | sub
                np.testing.assert_array_equal(np.abs(got[edge]), np.abs(np.where(
                    sub & (got == 0), 0, want)[edge]))
                _close(got[~edge], want[~edge], 1e-3 if dtype == "float16" else 1e-6)
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{how} {name}")
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want),
                                              err_msg=f"{how} {name}: sign")
        for shape in ((0, 3), ()):
            e = np.full(shape, -2.5, dtype)
            got = getattr(kiln.ops, name)(kiln.tensor(e, device)).numpy()
            assert got.shape == shape and got.dtype == getattr(np, name)(e).dtype, (name, shape)
            np.testing.assert_array_equal(got, getattr(np, name)(e))


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor", "logical_not"])
def test_logical_ops_are_numpys(device, rng, name):
    # Truth values of bool, int32 and float tensors (NaN and -0.0 included),
    # broadcasting, numbers on either side, empty tensors, inside kiln.fuse.
    i = rng.integers(-2, 3, (7, 33)).astype(np.int32)
    f = rng.choice(np.array([0.0, -0.0, np.nan, 1.5, -np.inf], np.float32), (7, 33))
    bl = rng.integers(0, 2, (33,)).astype(np.bool_)
    ours, theirs = getattr(kiln.ops, name), getattr(np, name)

    def check(got, want):
        got = got.numpy()
        assert got.dtype == np.bool_ and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    if name == "logical_not":
        for x in (i, f, bl):
            check(ours(kiln.tensor(x, device)), theirs(x))
        check(kiln.fuse(lambda x: ours(x))(kiln.tensor(f, device)), theirs(f))
        return
    for x, y in ((i, f), (f, bl), (bl, i), (i, i[::-1].copy())):
        check(ours(kiln.tensor(x, device), kiln.tensor(y, device)), theirs(x, y))
        check(ours(kiln.tensor(x, device), y), theirs(x, y))  # a numpy operand
    for v in (0, 3, 0.0, float("nan"), True, False):
        check(ours(kiln.tensor(f, device), v), theirs(f, v))
        check(ours(v, kiln.tensor(i, device)), theirs(v, i))
    check(kiln.fuse(lambda x, y: ours(x > 0, y))(kiln.tensor(i, device), kiln.tensor(f, device)),
          theirs(i > 0, f))
    e = np.zeros((0, 33), np.float32)
    check(ours(kiln.tensor(e, device), kiln.tensor(bl, device)), theirs(e, bl))
    with pytest.raises(kiln.InvalidArgument, match=f"{name}: .*broadcast"):
        ours(kiln.tensor(i, device), kiln.tensor(np.zeros((3, 2), np.int32), device))
    with pytest.raises(kiln.InvalidArgument, match=f"{name}: at least one operand"):
        ours(1, 0)


def test_predicates_refuse_integers(device):
    for name in ("isnan", "isinf", "isfinite", "reciprocal"):
        with pytest.raises(kiln.InvalidArgument, match=name):
            getattr(kiln.ops, name)(kiln.tensor(np.arange(3, dtype=np.int32), device))


@pytest.mark.parametrize("op", sorted(NUMPY_BINARY))
@pytest.mark.parametrize("shapes", [((7, 1), (1, 33)), ((33,), (5, 33)), ((1000,), (1000,)),
                                    ((1,), (7,)), ((7,), (1,)), ((3, 1, 5, 1), (4, 1, 7))],
                         ids=str)
def test_binary_broadcasting(device, rng, op, shapes):
    a = rng.uniform(-2, 2, shapes[0]).astype(np.float32)
    b = rng.uniform(-2, 2, shapes[1]).astype(np.float32)
    if op == "pow":
        a = np.abs(a) + 0.1
    if op in ("div", "floor_div", "floor_mod"):
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    if op in ("floor_div", "floor_mod"):
        # Divisors that are powers of two: exact quotients, which the device
        # floors as numpy does.
        b = (rng.choice([-1, 1], shapes[1]) * 2.0 ** rng.integers(-2, 2, shapes[1])).astype(
            np.float32)
    c = getattr(kiln.ops, op)(kiln.tensor(a, device), kiln.tensor(b, device))
    _close(c.numpy(), NUMPY_BINARY[op](a.astype(np.float64), b), 1e-5 if op != "pow" else 1e-4)


def test_float_pow_is_numpys_power(device):
    # Zero, negative and infinite bases, NaN operands; -0.0 keeps its sign
    # for odd integer exponents ((-0.0) ** -1 is -inf).
    bases = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf, np.nan,
                      1e-30, -7.0], np.float32)
    exps = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, np.inf, -np.inf,
                     np.nan, 1e9, 7.0, 4.0], np.float32)
    a, b = (x.astype(np.float32) for x in np.meshgrid(bases, exps, indexing="ij"))
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    for got in (kiln.ops.pow(kiln.tensor(a, device), kiln.tensor(b, device)).numpy(),
                (kiln.tensor(a, device) ** kiln.tensor(b, device)).numpy()):
        np.testing.assert_allclose(got, want, rtol=1e-5)
        zero = want == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    # A number for the exponent: numpy's `x ** e`, whose 0.5 is a square root
    # ((-inf) ** 0.5 NaN, (-0.0) ** 0.5 -0.0; in an array, C's pow: inf, 0.0).
    for e in (0, 1, 2, 3, 4, -1, -2, 2.5, 0.5):
        with np.errstate(all="ignore"):
            want = bases ** np.float32(e)
        for got in ((kiln.tensor(bases, device) ** e).numpy(),
                    kiln.ops.pow(kiln.tensor(bases, device), e).numpy()):
            np.testing.assert_allclose(got, want, rtol=1e-5)
            np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_propagate_nan(device, op):
    # numpy's maximum/minimum: NaN where either operand is, on either side,
    # with tensors, with a number, in a chain and fused.
    # (and on a tie the second operand, as numpy: max(0.0, -0.0) is -0.0)
    special = [np.nan, 1.0, -np.inf, np.inf, -0.5, 0.0, -0.0]
    a = np.array(special * 7, np.float32)
    b = np.repeat(np.array(special, np.float32), 7)
    want = getattr(np, {"max": "maximum", "min": "minimum"}[op])(a, b)
    fn = getattr(kiln.ops, op)
    ta, tb = kiln.tensor(a, device), kiln.tensor(b, device)
    np.testing.assert_array_equal(fn(ta, tb).numpy(), want)
    np.testing.assert_array_equal(np.signbit(fn(ta, tb).numpy()), np.signbit(want))
    np.testing.assert_array_equal(fn(tb, ta).numpy(), want)
    np.testing.assert_array_equal(kiln.fuse(lambda x, y: fn(x, y))(ta, tb).numpy(), want)
    np.testing.assert_array_equal(fn(ta, np.float32(np.nan)).numpy(), np.full(a.shape, np.nan))
    np.testing.assert_array_equal(kiln.ops.elementwise_chain(ta, [(op, tb)]).numpy(), want)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_constant_zero_operands_keep_ieee_results(device, rng, dtype):
    # x * 0.0 is NaN for NaN or infinite x and a signed zero otherwise,
    # -0.0 + 0.0 is +0.0, 0.0 / x is NaN for a zero x: drivers that fold
    # these with the constant in the kernel (lavapipe) must not change them.
    # Eager, in a chain and fused; vec4 and scalar
    # kernels (lengths 4 * 9 and 9 * 7); numpy's exact bits as the reference.
    if dtype == "float16":
        require_feature(device, "shader-f16")
    special = np.array([np.nan, np.inf, -np.inf, -1.0, 1.0, 0.0, -0.0, 2.5, -3.0], dtype)
    ops = {"mul": operator.mul, "add": operator.add, "sub": operator.sub,
           "div": operator.truediv, "floor_div": operator.floordiv, "floor_mod": operator.mod,
           "pow": operator.pow}
    for n in (36, 63):
        xs = np.resize(rng.permutation(special), n)
        x = kiln.tensor(xs, device)
        for name, f in ops.items():
            for c in (0.0, -0.0, 1.0, -1.0):
                for first in (False, True):
                    with np.errstate(all="ignore"):
                        want = f(xs.dtype.type(c), xs) if first else f(xs, xs.dtype.type(c))
                    results = {
                        "eager": f(c, x) if first else f(x, c),
                        "chain": kiln.ops.elementwise_chain(
                            x, [(name, c, True) if first else (name, c)]),
                        "fused": kiln.fuse(
                            (lambda t: f(c, t)) if first else (lambda t: f(t, c)))(x),
                    }
                    for how, got in results.items():
                        got = got.numpy()
                        where = f"{how} {'%r %s x' % (c, name) if first else 'x %s %r' % (name, c)}"
                        # (pow(|x|, y) of WGSL, used for y == -1, need not be exact)
                        np.testing.assert_allclose(
                            got, want, rtol=4 * np.finfo(dtype).eps if name == "pow" else 0,
                            atol=0, err_msg=where)
                        zero = want == 0
                        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]),
                                                      err_msg=f"{where}: sign of zero")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_float_floor_div_and_mod_are_numpys_at_infinities(device, dtype):
    # numpy's // and % for floats: an infinite dividend gives NaN (inf // 0
    # stays inf), a finite one over an infinite divisor gives -1 and the
    # divisor where the signs differ, else a zero and the dividend. The
    # other values here have exact quotients, where flooring agrees.
    if dtype == "float16":
        require_feature(device, "shader-f16")
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 3.0]
    a = np.repeat(np.array(special, dtype), len(special))
    b = np.tile(np.array(special, dtype), len(special))
    ta, tb = kiln.tensor(a, device), kiln.tensor(b, device)
    for name, f in (("floor_div", operator.floordiv), ("floor_mod", operator.mod)):
        with np.errstate(all="ignore"):
            want = f(a, b)
        for how, got in (("eager", f(ta, tb)), ("op", getattr(kiln.ops, name)(ta, tb)),
                         ("fused", kiln.fuse(f)(ta, tb))):
            got = got.numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{how} {name}")
            by_inf = np.isinf(b) & np.isfinite(a)
            np.testing.assert_array_equal(np.signbit(got[by_inf]), np.signbit(want[by_inf]),
                                          err_msg=f"{how} {name}: sign")


def _fma_rounds_once(device, dtype):
    # fma(1 + e, 1 + e, -(1 + 2e)) is e * e with one rounding, 0 with the
    # product rounded first (e = 2^-12 for float32, 2^-6 for float16).
    e = 2.0 ** (-12 if dtype == "float32" else -6)
    x = kiln.tensor(np.full(4, 1 + e, dtype), device)
    got = kiln.ops.elementwise_chain(x, [("fma", 1 + e, -(1 + 2 * e))]).numpy()
    return got[0] == e * e


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_float_floor_div_and_mod_floor_the_exact_quotient(device, rng, dtype):
    # numpy floors the exact quotient (1 // 0.1 is 9, 1 % 0.1 0.099999987)
    # and gives a zero remainder the divisor's sign (1 % -1 is -0.0); kiln
    # corrects the rounded quotient with two fma remainders, which a device
    # whose fma rounds the product first (lavapipe) cannot: docs/ops.md.
    if dtype == "float16":
        require_feature(device, "shader-f16")
    if not _fma_rounds_once(device, dtype):
        pytest.skip(f"{device} rounds fma's product first, so floor_div and floor_mod floor "
                    "the rounded quotient there (docs/ops.md)")
    n = 5000
    big = 2.0 ** (20 if dtype == "float32" else 8)
    small = 2.0 ** (-20 if dtype == "float32" else -12)
    a = (rng.uniform(-1, 1, n) * 10.0 ** rng.integers(-3, 7, n)).astype(dtype)
    b = (rng.uniform(-1, 1, n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
    keep = (b != 0) & (np.abs(a / b.astype(np.float64)) < big) & (np.abs(a) >= small * np.abs(b))
    a = np.concatenate([[1.0, -1.0, 1.0, 6.0, -1e-4, 0.3, -0.0, 0.0, 7.0, -7.0], a[keep]])
    b = np.concatenate([[0.1, 0.1, -1.0, 3.0, 300.0, 0.1, 1.0, -1.0, -0.7, 0.7], b[keep]])
    a, b = a.astype(dtype), b.astype(dtype)
    ta, tb = kiln.tensor(a, device), kiln.tensor(b, device)
    for name, f in (("floor_div", operator.floordiv), ("floor_mod", operator.mod)):
        want = f(a, b)
        for how, got in (("eager", f(ta, tb)), ("fused", kiln.fuse(f)(ta, tb))):
            got = got.numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{how} {name}")
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want),
                                          err_msg=f"{how} {name}: sign")


def test_positive_chain_and_fused_where_errors(device):
    # +t is a copy, as numpy's +a, and refused for bools as numpy's is.
    t = kiln.tensor(np.array([-0.0, 1.0, np.nan], np.float32), device)
    p = +t
    assert p is not t and p.dtype == t.dtype
    np.testing.assert_array_equal(np.signbit(p.numpy()), [True, False, False])
    for positive in (lambda x: +(x > 0), kiln.fuse(lambda x: +(x > 0))):
        with pytest.raises(TypeError, match="unary \\+ is not defined for a bool tensor"):
            positive(t)
    # An empty chain's shapes are quoted as given, not with each 0 as 1.
    e, o = kiln.empty((0, 4), device=device), kiln.tensor(np.ones((3, 3), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="elementwise_chain: inputs of shapes \\(0, 4\\), "
                                                   "\\(3, 3\\)"):
        kiln.ops.elementwise_chain(e, [("add", o)])
    # A fused where names a bool operand bool.
    b = kiln.tensor(np.array([True, False]), device)
    f = kiln.tensor(np.array([1.0, 2.0], np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="where: dtype mismatch: a is bool but b is "
                                                   "float32 \\(cast one first; bool operands"):
        kiln.fuse(lambda c, x, y: kiln.ops.where(c, x, y))(b, b, f)
    with pytest.raises(kiln.InvalidArgument, match="such as kiln.ops.exp for np.exp"):
        kiln.fuse(lambda x: np.exp(x))(f)


def test_float16_floor_div_and_mod_compute_in_float32(device):
    # numpy's float16 computes in float32: 65504 % 3 is 2, though neither
    # 65504 / 3 nor 3 * 21835 is a float16 (quotients that rounding does not
    # carry across an integer, so that devices whose fma rounds twice agree).
    require_feature(device, "shader-f16")
    a = np.array([65504, 65504, -65504, 30000, 1000, 61440], np.float16)
    b = np.array([3, 7, 3, 3, -3, 7], np.float16)
    ta, tb = kiln.tensor(a, device), kiln.tensor(b, device)
    for f in (operator.floordiv, operator.mod):
        with np.errstate(all="ignore"):
            want, by_three = f(a, b), f(a, np.float16(3.0))
        np.testing.assert_array_equal(f(ta, tb).numpy(), want)
        np.testing.assert_array_equal(kiln.fuse(f)(ta, tb).numpy(), want)
        np.testing.assert_array_equal(f(ta, 3.0).numpy(), by_three)


def _edgy_ints(rng, shape, lo=-2**31, hi=2**31 - 1):
    x = rng.integers(lo, hi, shape, dtype=np.int64, endpoint=True).astype(np.int32)
    flat = x.reshape(-1)
    edges = [-2**31, 2**31 - 1, 0, -1, 1, 31, 32, 33]
    flat[:len(edges)] = np.array(edges, np.int64)[:flat.size].astype(np.int32)
    return x


@pytest.mark.parametrize("op", sorted(NUMPY_INT_UNARY) + sorted(NUMPY_INT_BINARY))
@pytest.mark.parametrize("shapes", [((7, 1), (1, 33)), ((1000,), (1000,)), ((1,), (7,)),
                                    ((64, 33), (33,))], ids=str)
def test_integer_ops(device, rng, op, shapes):
    a = _edgy_ints(rng, shapes[0])
    if op in NUMPY_INT_UNARY:
        got = getattr(kiln.ops, op)(kiln.tensor(a, device)).numpy()
        want = NUMPY_INT_UNARY[op](a)
    else:
        small = op in ("div", "floor_div", "floor_mod", "shift_left", "shift_right", "pow")
        b = _edgy_ints(rng, shapes[1], -40, 40) if small else _edgy_ints(rng, shapes[1])
        got = getattr(kiln.ops, op)(kiln.tensor(a, device), kiln.tensor(b, device)).numpy()
        want = NUMPY_INT_BINARY[op](a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", sorted(NUMPY_INT_BINARY))
def test_integer_ops_with_constants(device, rng, op):
    # A number operand is a constant in the kernel: 0 as a divisor too
    # (x / 0 = x, x % 0 = 0), on either side.
    a = _edgy_ints(rng, (7, 33))
    t = kiln.tensor(a, device)
    fn = getattr(kiln.ops, op)
    for c in (0, 1, -1, 3, 31, 32, -2**31, 2**31 - 1):
        if op == "pow" and c > 40:
            continue
        np.testing.assert_array_equal(fn(t, c).numpy(), NUMPY_INT_BINARY[op](a, np.int32(c)),
                                      err_msg=f"x {op} {c}")
        if op not in ("pow", "shift_left", "shift_right"):
            np.testing.assert_array_equal(fn(c, t).numpy(), NUMPY_INT_BINARY[op](np.int32(c), a),
                                          err_msg=f"{c} {op} x")


@pytest.mark.parametrize("op", sorted(NUMPY_COMPARE))
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
def test_comparisons(device, rng, op, dtype):
    a = np.round(rng.uniform(-2, 2, (7, 1)) * 2) / 2
    b = np.round(rng.uniform(-2, 2, (33,)) * 2) / 2
    a, b = a.astype(dtype), b.astype(dtype)
    if dtype == np.float32:
        a[:4, 0] = [np.nan, np.inf, -0.0, -np.inf]
        b[:3] = [0.0, np.nan, np.inf]
    got = getattr(kiln.ops, op)(kiln.tensor(a, device), kiln.tensor(b, device)).numpy()
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, NUMPY_COMPARE[op](a, b))
    # A number operand is a one-element tensor of the tensor's dtype.
    np.testing.assert_array_equal(getattr(kiln.ops, op)(kiln.tensor(a, device), 1).numpy(),
                                  NUMPY_COMPARE[op](a, dtype(1)))
    np.testing.assert_array_equal(getattr(kiln.ops, op)(1, kiln.tensor(b, device)).numpy(),
                                  NUMPY_COMPARE[op](dtype(1), b))


def test_clamp_and_fma(device, rng):
    x = rng.uniform(-2, 2, (5, 1, 64)).astype(np.float32)
    x.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    lo = rng.uniform(-1.5, 0.5, (7, 1)).astype(np.float32)
    hi = rng.uniform(-0.5, 1.5, (64,)).astype(np.float32)
    lo[3, 0] = np.nan
    got = kiln.ops.clamp(kiln.tensor(x, device), lo, hi).numpy()
    np.testing.assert_array_equal(got, np.clip(x, lo, hi))  # lo > hi gives hi, as numpy
    np.testing.assert_array_equal(kiln.ops.clip(kiln.tensor(x, device), 0, 1).numpy(),
                                  np.clip(x, 0, 1))
    xi = _edgy_ints(rng, (1000,))
    np.testing.assert_array_equal(kiln.ops.clamp(kiln.tensor(xi, device), -5, 7).numpy(),
                                  np.clip(xi, -5, 7))
    a = rng.standard_normal((7, 33)).astype(np.float32)
    b = rng.standard_normal((33,)).astype(np.float32)
    c = rng.standard_normal((7, 1)).astype(np.float32)
    _close(kiln.ops.fma(kiln.tensor(a, device), b, c).numpy(),
           a.astype(np.float64) * b + c, 1e-6)
    _close(kiln.ops.fma(kiln.tensor(a, device), 2.0, 1.0).numpy(), a * 2.0 + 1.0, 1e-6)


def test_bool_tensors_and_integer_chains(device, rng):
    x = rng.uniform(-1, 1, 100).astype(np.float32)
    mask = kiln.ops.gt(kiln.tensor(x, device), 0.0)
    np.testing.assert_array_equal(kiln.ops.where(mask, x, 0.0).numpy(), np.where(x > 0, x, 0))
    np.testing.assert_array_equal(kiln.ops.bitwise_and(mask, kiln.ops.lt(mask, 1)).numpy(),
                                  np.zeros(100, np.int32))
    xi = _edgy_ints(rng, (7, 33))
    y = kiln.ops.elementwise_chain(kiln.tensor(xi, device),
                                   [("shift_left", 3), ("bitwise_xor", xi[0]), ("sub", 7), "abs"])
    v = _wrap(np.asarray(xi, np.int64) << 3) ^ xi[0]
    v = _wrap(np.asarray(v, np.int64) - 7)
    want = _wrap(np.abs(np.asarray(v, np.int64)))
    np.testing.assert_array_equal(y.numpy(), want)


@pytest.mark.parametrize("op,axis", [
    (op, axis) for op in ("sum", "prod", "amax", "amin", "argmax", "argmin")
    for axis in (None, 0, 1, (0, 2)) if not (op.startswith("arg") and isinstance(axis, tuple))],
    ids=str)
def test_integer_reductions(device, rng, op, axis):
    x = _edgy_ints(rng, (5, 7, 33)) if op != "prod" else rng.integers(-3, 4, (5, 7, 33)).astype(
        np.int32)
    if op in ("argmax", "argmin"):
        got = getattr(kiln.ops, op)(kiln.tensor(x, device), axis=axis).numpy()
        np.testing.assert_array_equal(got, getattr(np, op)(x, axis=axis))
        return
    got = getattr(kiln.ops, op)(kiln.tensor(x, device), axis=axis).numpy()
    assert got.dtype == np.int32
    want = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min}[op](
        x.astype(np.int64), axis=axis)
    np.testing.assert_array_equal(got, _wrap(want))


def test_counting_with_comparisons(device, rng):
    x = rng.standard_normal((33, 1000)).astype(np.float32)
    positive = kiln.ops.gt(kiln.tensor(x, device), 0.0)
    np.testing.assert_array_equal(kiln.ops.sum(positive, axis=1).numpy(), np.sum(x > 0, axis=1))
    assert int(kiln.ops.sum(positive).numpy()) == int(np.sum(x > 0))
    np.testing.assert_array_equal(kiln.ops.argmax(positive, axis=1).numpy(),
                                  np.argmax(x > 0, axis=1))
    with pytest.raises(kiln.InvalidArgument, match="mean takes f32 or f16"):
        kiln.ops.mean(positive)


def test_chains_with_comparisons(device, rng):
    x = rng.standard_normal((7, 33)).astype(np.float32)
    b = rng.standard_normal(33).astype(np.float32)
    t = kiln.tensor(x, device)
    mask = kiln.ops.elementwise_chain(t, [("sub", b), "abs", ("gt", 0.5)])
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask.numpy(), np.abs(x - b) > np.float32(0.5))
    # After a comparison the running value is int32 0 or 1.
    bits = rng.integers(0, 4, (7, 1)).astype(np.int32)
    y = kiln.ops.elementwise_chain(t, [("lt", 0.0), ("shift_left", bits), ("add", 1)])
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y.numpy(), ((x < 0).astype(np.int32) << bits) + 1)
    e = kiln.ops.elementwise_chain(kiln.tensor(np.zeros((0, 3), np.float32), device),
                                   [("ge", 1.0)])
    assert e.dtype == np.bool_ and e.shape == (0, 3)


def test_integer_and_comparison_errors(device):
    xi = kiln.tensor(np.ones(3, np.int32), device)
    f = kiln.tensor(np.ones(3, np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="exp takes f32 or f16"):
        kiln.ops.exp(xi)
    with pytest.raises(kiln.InvalidArgument, match="bitwise_and takes i32"):
        kiln.ops.bitwise_and(f, f)
    with pytest.raises(kiln.InvalidArgument, match="0.5 is not an int32 value"):
        kiln.ops.lt(xi, 0.5)
    with pytest.raises(kiln.InvalidArgument, match="shift_left: the number 0.5 is not an int32 "
                                                   "value"):
        kiln.ops.shift_left(xi, 0.5)
    with pytest.raises(kiln.InvalidArgument, match="dtype mismatch"):
        kiln.ops.clamp(f, xi, f)
    with pytest.raises(kiln.InvalidArgument, match="fma takes f32 or f16"):
        kiln.ops.fma(xi, xi, xi)
    with pytest.raises(kiln.InvalidArgument, match="at least one operand must be a tensor"):
        kiln.ops.lt(1, 2)
    with pytest.raises(kiln.InvalidArgument, match=r"^elementwise_chain: step 1 \(clamp\): the step is "
                       r"\('clamp', a, b\)"):
        kiln.ops.elementwise_chain(f, [("clamp", f)])
    with pytest.raises(kiln.InvalidArgument, match=r"^elementwise_chain: step 1 \(cast\): the "
                                                   r"step is \('cast', dtype\)"):
        kiln.ops.elementwise_chain(f, [("cast",)])
    with pytest.raises(kiln.InvalidArgument, match=r"^elementwise_chain: step 2 \(add\): the "
                                                   r"step is \('add', operand\)"):
        kiln.ops.elementwise_chain(f, ["exp", ("add",)])
    with pytest.raises(kiln.InvalidArgument, match=r"^elementwise_chain: step 1 \(exp\): exp "
                                                   r"takes no operand"):
        kiln.ops.elementwise_chain(f, [("exp", 1.0)])
    np.testing.assert_array_equal(kiln.ops.elementwise_chain(f, [("neg",), "abs"]).numpy(),
                                  np.abs(-f.numpy()))
    with pytest.raises(kiln.InvalidArgument, match=r"^elementwise_chain: step 1 \(add\) of the "
                                                   r"chain: shapes \[.*\] and \[5\] do not "
                                                   r"broadcast"):
        kiln.ops.elementwise_chain(f, [("add", np.ones(5, np.float32))])
    with pytest.raises(kiln.InvalidArgument, match="is not a dtype"):
        kiln.ops.elementwise_chain(f, [("cast", 3)])
    with pytest.raises(kiln.InvalidArgument, match="float64"):
        kiln.ops.elementwise_chain(f, [("cast", np.float64)])
    with pytest.raises(kiln.InvalidArgument, match="other operand is f32 but C1 is i32"):
        kiln.ops.elementwise_chain(f, [("where", f, xi)])
    with pytest.raises(kiln.InvalidArgument, match="^elementwise_chain: step 1: a step is an op name"):
        kiln.ops.elementwise_chain(f, [3])
    with pytest.raises(kiln.InvalidArgument, match="running value is i32, but exp takes"):
        kiln.ops.elementwise_chain(f, [("lt", 0.0), "exp"])


@pytest.mark.parametrize("shape", [(7, 33), (1, 1), (3, 4099)], ids=str)
def test_chain_of_ternary_where_and_cast_steps(device, rng, shape):
    x = rng.uniform(-2, 2, shape).astype(np.float32)
    x.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    # +-2^k: x * b is exact, so fma and a multiply and add agree, and so
    # does the comparison after them on any device.
    b = (rng.choice([-1, 1], shape[-1:]) * 2.0 ** rng.integers(-2, 3, shape[-1:])).astype(
        np.float32)
    hi = rng.uniform(-1, 2, (shape[0], 1)).astype(np.float32)
    pick = rng.uniform(-2, 2, shape).astype(np.float32)
    other = rng.integers(-100, 100, shape[-1:]).astype(np.int32)
    t = kiln.tensor(x, device)
    y = kiln.ops.elementwise_chain(t, [
        ("fma", b, 0.25), ("clamp", -1.0, hi), ("gt", 0.0), ("where", pick, -0.0),
        ("mul", 1000.0), ("cast", np.int32), ("where", 7, other)])
    assert y.dtype == np.int32 and y.shape == shape
    with np.errstate(invalid="ignore"):
        v = np.where(np.clip(x * b + np.float32(0.25), -1, hi) > 0, pick, np.float32(-0.0))
        want = np.where((v * np.float32(1000)).astype(np.int32) != 0, 7, other)
    np.testing.assert_array_equal(y.numpy(), want)
    # The sign of a zero is kept, and int32 comes in through a cast step.
    z = kiln.ops.elementwise_chain(t, [("ge", 0.5), ("where", pick, -0.0)])
    assert z.dtype == np.float32
    np.testing.assert_array_equal(np.signbit(z.numpy()), np.signbit(np.where(x >= 0.5, pick, -0.0)))
    ints = rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)
    h = kiln.ops.elementwise_chain(kiln.tensor(ints, device), [("cast", "f32"), ("mul", 0.5)])
    np.testing.assert_array_equal(h.numpy(), ints.astype(np.float32) * np.float32(0.5))
    # Empty inputs: no kernel, numpy's shape and the chain's dtype.
    e = kiln.ops.elementwise_chain(kiln.tensor(np.zeros((0, 3), np.float32), device),
                                   [("gt", 0.0), ("where", 1.5, 2.5), ("cast", "int32")])
    assert e.dtype == np.int32 and e.shape == (0, 3)
    # Numbers alone in a where take the input's dtype, not the comparison's.
    w = kiln.ops.elementwise_chain(t, [("gt", 0.0), ("where", 1.5, -2.5)])
    assert w.dtype == np.float32
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(w.numpy(), np.where(x > 0, 1.5, -2.5).astype(np.float32))


def test_number_and_numpy_operands(device, rng):
    a = rng.standard_normal((7, 33)).astype(np.float32)
    x = kiln.tensor(a, device)
    _close(kiln.ops.add(x, 2.5).numpy(), a + 2.5)
    _close(kiln.ops.sub(1.0, x).numpy(), 1.0 - a)
    b = rng.standard_normal((33,)).astype(np.float32)
    _close(kiln.ops.mul(x, b).numpy(), a * b)


def test_chain_kernels_tell_tensors_from_constants(device):
    # A shape-[1] float32 tensor and the constant 0.0 (or 1.0, 2.0) must not
    # share a cached kernel, whichever comes first.
    x = kiln.tensor(np.array([-2.0, -1.0, 1.0, 2.0], np.float32), device)
    t = kiln.tensor(np.array([5.0], np.float32), device)
    np.testing.assert_array_equal(
        kiln.ops.elementwise_chain(x, [("clamp", t, 0.0)]).numpy(), [0, 0, 0, 0])
    np.testing.assert_array_equal(
        kiln.ops.elementwise_chain(x, [("clamp", 0.0, t)]).numpy(), [0, 0, 1, 2])
    y = kiln.tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32), device)
    np.testing.assert_array_equal(
        kiln.ops.elementwise_chain(y, [("fma", t, 0.0)]).numpy(), [5, 10, 15, 20])
    np.testing.assert_array_equal(
        kiln.ops.elementwise_chain(y, [("fma", 0.0, t)]).numpy(), [5, 5, 5, 5])
    w = kiln.tensor(np.array([3.0], np.float32), device)
    np.testing.assert_array_equal(kiln.ops.elementwise_chain(y, [("mul", w)]).numpy(),
                                  [3, 6, 9, 12])
    np.testing.assert_array_equal((y * 0.0).numpy(), [0, 0, 0, 0])


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
    # numpy's signatures: axis=None reduces every axis (a 0-d result).
    a = rng.uniform(-1, 1, (7, 33)).astype(np.float32)
    x = kiln.tensor(a, device)
    _close(kiln.ops.sum(x).numpy(), a.sum(), 1e-5)
    _close(kiln.ops.sum(x, 1).numpy(), a.sum(1), 1e-5)
    _close(kiln.ops.mean(x, -1, keepdims=True).numpy(), a.mean(1, keepdims=True), 1e-5)
    _close(kiln.ops.mean(x, keepdims=True).numpy(), a.mean(keepdims=True), 1e-5)
    _close(kiln.ops.amax(x, 0).numpy(), a.max(0))
    _close(kiln.ops.amin(x).numpy(), a.min())
    _close(kiln.ops.max(x, axis=1).numpy(), a.max(1))
    _close(kiln.ops.min(x, axis=(0, 1), keepdims=True).numpy(), a.min(keepdims=True))
    _close(kiln.ops.max(x).numpy(), a.max())
    # With a second operand max and min stay elementwise.
    b = rng.uniform(-1, 1, (33,)).astype(np.float32)
    _close(kiln.ops.max(x, kiln.tensor(b, device)).numpy(), np.maximum(a, b))
    _close(kiln.ops.min(x, 0.25).numpy(), np.minimum(a, 0.25))
    _close(kiln.ops.maximum(x, b).numpy(), np.maximum(a, b))
    _close(kiln.ops.minimum(x, b).numpy(), np.minimum(a, b))
    with pytest.raises(kiln.InvalidArgument, match="elementwise and takes no axis"):
        kiln.ops.max(x, b, axis=0)


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (33, 1000), (1000, 7)], ids=str)
def test_softmax(device, rng, shape):
    a = rng.uniform(-50, 100, shape).astype(np.float32)
    y = kiln.ops.softmax(kiln.tensor(a, device)).numpy()
    e = np.exp(a - a.max(1, keepdims=True))
    _close(y, e / e.sum(1, keepdims=True), 1e-5)
    np.testing.assert_allclose(y.sum(1), 1, rtol=1e-4)


def test_float16_without_shader_f16_is_a_missing_feature(device):
    # Where the device has no shader-f16, an f16 operator is kiln.Unavailable
    # (kiln.FeatureMissing), as an f16 kernel of one's own is; elsewhere it runs.
    x = kiln.tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float16), device)
    e = kiln.tensor(np.zeros((0, 4), np.float16), device)  # (empty: no kernel built)
    calls = [(lambda: x + 1, "add"), (lambda: 2 ** x, "pow"), (lambda: x.reshape(2, 2), "reshape"),
             (lambda: x.astype("float32"), "cast"), (lambda: kiln.fuse(lambda v: v * 2)(x), "fused"),
             (lambda: kiln.ops.sum(x), "reduce sum"), (lambda: x.clip(None, 1), "clip"),
             (lambda: kiln.ops.logical_and(x, x), "logical_and"), (lambda: e + 1, "add"),
             (lambda: kiln.ops.exp(e), "exp"), (lambda: e.max(1), "reduce max")]
    for call, name in calls:
        if device.has_feature("shader-f16"):
            call().numpy()
        else:
            with pytest.raises(kiln.FeatureMissing, match=f"{name}.*shader-f16"):
                call()


def test_float16(device, rng):
    require_feature(device, "shader-f16")
    a = rng.standard_normal((7, 33)).astype(np.float16)
    b = rng.standard_normal((33,)).astype(np.float16)
    c = kiln.ops.add(kiln.tensor(a, device), kiln.tensor(b, device)).numpy()
    assert c.dtype == np.float16
    np.testing.assert_allclose(c, a + b, rtol=1e-3, atol=1e-3)
    s = kiln.ops.sum(kiln.tensor(a, device), 1).numpy()
    np.testing.assert_allclose(s, a.astype(np.float32).sum(1), rtol=1e-2, atol=1e-2)


def test_edge_values(device):
    a = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -1.0, 2.0], np.float32)
    x = kiln.tensor(a, device)
    neg = kiln.ops.neg(x).numpy()
    assert np.isnan(neg[0]) and np.signbit(neg[2]) and not np.signbit(neg[1])
    np.testing.assert_array_equal(neg[3:], -a[3:])
    relu = kiln.ops.relu(x).numpy()
    np.testing.assert_array_equal(relu, [np.nan, 0, 0, np.inf, 0, 0, 2])  # NaN stays NaN
    assert np.isnan(relu[0])
    # numpy's maximum(x, 0): -0.0 becomes +0.0
    assert not np.signbit(relu[1]) and not np.signbit(relu[2])
    s = kiln.ops.add(x, x).numpy()
    assert np.isnan(s[0]) and s[3] == np.inf and s[4] == -np.inf and np.signbit(s[1])
    ab = kiln.ops.abs(x).numpy()
    assert not np.signbit(ab[1]) and ab[4] == np.inf


def test_tanh_keeps_relative_accuracy_near_zero(device, rng):
    # Implementations build tanh from exp and lose relative accuracy near 0
    # (1.3% at 1e-6 on lavapipe). Below |x| = 0.25 kiln evaluates tanh's series:
    # within 2 ulps there (1.12 at most over a dense grid on lavapipe), with the
    # sign of zero kept. From 0.25 on it is the implementation's tanh, whose
    # accuracy WGSL leaves loose (lavapipe: 7.5 ulps, 4.6e-7 relative, just
    # above 0.25), so there it is held to a relative 1e-5; the ends are exact.
    tiny = np.array([1e-30, 1e-10, 1e-6, -1e-6, 1e-4, 1e-2, 0.1, 0.2499, -0.2499], np.float32)
    beyond = np.array([0.25, -0.25, 0.3, 1.0, -3.0, 9.0], np.float32)
    a = np.concatenate([tiny, rng.uniform(-0.25, 0.25, 200).astype(np.float32),
                        beyond, rng.uniform(-10, 10, 60).astype(np.float32),
                        np.array([0.0, -0.0, 20.0, -20.0, np.inf, -np.inf, np.nan], np.float32)])
    for shape in [(a.size,), (a.size // 4, 4)]:
        x = a[:int(np.prod(shape))].reshape(shape).ravel()
        y = kiln.ops.tanh(kiln.tensor(x.reshape(shape), device)).numpy().ravel()
        want = np.tanh(x.astype(np.float64))
        near = np.abs(x) < 0.25
        ulps = np.abs(y[near] - want[near]) / np.spacing(np.abs(want[near]).astype(np.float32))
        assert ulps.max() <= 2, (x[near][ulps.argmax()], ulps.max())
        far = ~near & np.isfinite(x)
        np.testing.assert_allclose(y[far], want[far], rtol=1e-5, atol=0)
    y = kiln.ops.tanh(kiln.tensor(a, device)).numpy()[-7:]
    assert not np.signbit(y[0]) and np.signbit(y[1])
    np.testing.assert_array_equal(y[2:6], [1, -1, 1, -1])
    assert np.isnan(y[6])


@pytest.mark.parametrize("length", [1, 2, 300])
def test_row_operators_with_nan_or_inf(device, length):
    """numpy's results at every row length (one element too, where a
    compiler may fold x - max or x - mean to 0): softmax gives NaN for a row
    holding NaN or +inf, or holding only -inf (-inf beside finite values gets
    weight 0); layer norm gives NaN for a row holding NaN or an infinity;
    -0.0 is an ordinary zero."""
    x = np.zeros((5, length), np.float32)
    x[0, -1] = np.nan
    x[1, 0] = np.inf
    x[2, 0] = -np.inf
    x[3, 0] = -0.0
    x[4] = np.linspace(-1, 1, length)
    t = kiln.tensor(x, device)
    gamma, beta = np.ones(length, np.float32), np.zeros(length, np.float32)
    with np.errstate(all="ignore"):
        m = x.max(axis=1, keepdims=True)
        e = np.exp(x - m)
        mean = x.mean(axis=1, keepdims=True)
        centred = x - mean
        want = {
            "softmax": e / e.sum(axis=1, keepdims=True),
            "log_softmax": x - m - np.log(e.sum(axis=1, keepdims=True)),
            "layer_norm": centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + 1e-5),
            "rms_norm": x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6),
        }
    got = {
        "softmax": kiln.ops.softmax(t),
        "log_softmax": kiln.ops.log_softmax(t),
        "layer_norm": kiln.ops.layer_norm(t, gamma, beta),
        "rms_norm": kiln.ops.rms_norm(t, gamma),
    }
    for name, y in got.items():
        # NaN where numpy has NaN, an infinity where it has one, close elsewhere.
        np.testing.assert_allclose(y.numpy(), want[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_kernels_are_cached_per_shape_and_dtype(device, rng):
    a = kiln.tensor(rng.standard_normal((3, 11)).astype(np.float32), device)
    kiln.ops.exp(a)
    n = len(device._cache)
    for _ in range(3):
        kiln.ops.exp(a)
    assert len(device._cache) == n
    kiln.ops.exp(kiln.tensor(rng.standard_normal((3, 12)).astype(np.float32), device))
    assert len(device._cache) == n + 1


def test_operand_type_errors_name_the_operator_and_argument(device):
    x = kiln.tensor(np.ones((2, 3), np.float32), device)
    x4 = kiln.tensor(np.ones((1, 4, 4, 2), np.float32), device)
    w4 = kiln.tensor(np.ones((3, 3, 2, 2), np.float32), device)
    for call, text in ((lambda: kiln.ops.layer_norm(x, None, None), "layer_norm: gamma .*NoneType"),
                       (lambda: kiln.ops.rms_norm(x, "g"), "rms_norm: gamma .*str"),
                       (lambda: kiln.ops.matmul(x, x.T, bias=[1.0, 2.0]), "matmul: bias .*list"),
                       (lambda: kiln.ops.matmul(x, 1), "matmul: b .*int"),
                       (lambda: kiln.ops.sum([1, 2]), "sum: x .*list"),
                       (lambda: kiln.ops.where(None, x, x), "where: cond .*NoneType"),
                       (lambda: kiln.ops.conv2d(None, w4), "conv2d: x .*NoneType"),
                       (lambda: kiln.ops.conv2d(x4, w4, bias="b"), "conv2d: bias .*str"),
                       (lambda: kiln.ops.logical_and(x, None), "logical_and: b .*NoneType"),
                       (lambda: kiln.ops.add(x, None), "add: b .*NoneType"),
                       (lambda: kiln.ops.concat([x, "a"]), r"concat: tensors\[1\] .*str"),
                       (lambda: kiln.ops.attention(x, x, None), "attention: v .*NoneType"),
                       (lambda: kiln.ops.softmax(None), "softmax: x .*NoneType")):
        with pytest.raises(kiln.ArgumentTypeError, match=text.replace(
                " .*", " must be a kiln.Tensor or a numpy array; got ")):
            call()
    # Attributes of the wrong type are TypeErrors too; a bad value of the
    # right type is kiln.InvalidArgument only.
    for call, text in ((lambda: kiln.ops.matmul(x, x.T, activation=1), "matmul: activation"),
                       (lambda: kiln.ops.matmul(x, x.T, accumulate=None), "matmul: accumulate"),
                       (lambda: kiln.ops.conv2d(x4, w4, layout=None), "conv2d: layout"),
                       (lambda: kiln.ops.conv2d(x4, w4, activation=1), "conv2d: activation"),
                       (lambda: kiln.ops.max_pool2d(x4, layout=4), "max_pool2d: layout"),
                       (lambda: x.astype(3), "astype: dtype 3 is not a dtype"),
                       (lambda: kiln.ops.cast(x, None), "cast: dtype None is not a dtype")):
        with pytest.raises(kiln.ArgumentTypeError, match=text):
            call()
    for call, text in ((lambda: kiln.ops.matmul(x, x.T, accumulate="f64"), "matmul: accumulate"),
                       (lambda: kiln.ops.conv2d(x4, w4, layout="NCWH"), "conv2d: layout"),
                       (lambda: x.astype("float99"), "astype: dtype 'float99' is not a dtype")):
        with pytest.raises(kiln.InvalidArgument, match=text) as e:
            call()
        assert not isinstance(e.value, TypeError), e.value
    # Pooling has no dilation to speak of.
    with pytest.raises(kiln.InvalidArgument,
                       match=r"max_pool2d: the window spans 8 along H \(kernel 8\) but"):
        kiln.ops.max_pool2d(x4, kernel=8)


def test_errors(device):
    f32 = kiln.tensor(np.ones((7, 2), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="do not broadcast"):
        kiln.ops.add(f32, kiln.tensor(np.ones((1, 33), np.float32), device))
    # f32 with f16: a dtype mismatch (kiln.InvalidArgument), or on a device
    # without shader-f16 the missing feature first (kiln.Unavailable).
    with pytest.raises((kiln.InvalidArgument, kiln.Unavailable),
                       match="dtype mismatch|no shader-f16"):
        kiln.ops.add(f32, kiln.tensor(np.ones((7, 2), np.float16), device))
    with pytest.raises(kiln.InvalidArgument, match="i32|int32|dtypes"):
        kiln.ops.exp(kiln.tensor(np.ones(3, np.int32), device))
    with pytest.raises(kiln.InvalidArgument, match="unknown elementwise op 'expp'"):
        kiln.ops.elementwise("expp", f32)
    with pytest.raises(kiln.InvalidArgument, match="rank"):
        kiln.ops.max_pool2d(kiln.tensor(np.ones((1, 1, 1, 1, 2), np.float32), device), 1)
    with pytest.raises(kiln.InvalidArgument, match="2-D|rank"):
        kiln.ops.reduce("sum", kiln.tensor(np.ones(5, np.float32), device))
    with pytest.raises(kiln.InvalidArgument, match="exp: x must be a kiln.Tensor or a numpy array"):
        kiln.ops.exp([1.0, 2.0])
    with pytest.raises(kiln.InvalidArgument, match="takes 2 inputs"):
        kiln.ops.elementwise("add", f32)
    # A bool operand is named as given, though it runs as int32.
    flags = kiln.tensor(np.ones((7, 2), bool), device)
    with pytest.raises(kiln.InvalidArgument,
                       match="add: dtype mismatch: A is float32, B is bool .bool operands run"):
        f32 + flags
    with pytest.raises(kiln.InvalidArgument, match="mul: dtype mismatch: A is bool, B is float32"):
        kiln.ops.mul(flags, np.ones((7, 2), np.float32))
    # int8 tensors (matmul_int8's) where an operator refuses them: named.
    i8 = kiln.tensor(np.ones((4, 8), np.int8), device)
    for call, name in ((lambda: kiln.ops.exp(i8), "exp"), (lambda: i8 * 200, "mul"),
                       (lambda: kiln.ops.mean(i8), "mean")):
        with pytest.raises(kiln.InvalidArgument, match=f"^{name}: .*int8"):
            call()


def test_operator_errors_name_the_operator_and_argument(device):
    w = kiln.tensor(np.ones((3, 3, 4, 2), np.float32), device)
    f32 = kiln.tensor(np.ones((3, 4), np.float32), device)
    for call, message in (
            (lambda: kiln.ops.conv2d(np.zeros((1, 5, 5, 4)), w),
             "^conv2d: x: arrays of float64 are not supported"),
            (lambda: kiln.ops.add(np.ones(3, np.float64), 1), "^add: a: arrays of float64"),
            (lambda: f32 + np.ones(4, np.int64), "^add: b: arrays of int64"),
            (lambda: kiln.ops.concat([f32, np.ones((1, 4))]), r"^concat: tensors\[1\]: arrays"),
            # A residual of the result's element count but another shape.
            (lambda: kiln.ops.matmul(np.ones((2, 3, 1, 2, 5), np.float32),
                                     np.ones((5, 3), np.float32),
                                     residual=np.ones((3, 2, 1, 2, 3), np.float32)),
             r"^matmul: residual has shape \[3, 2, 1, 2, 3\]; it must have the result's shape "
             r"\[2, 3, 1, 2, 3\]"),
            (lambda: kiln.ops.attention(np.ones((2, 2, 2, 7, 8), np.float32),
                                        np.ones((2, 2, 1, 9, 8), np.float32),
                                        np.ones((2, 2, 1, 9, 8), np.float32)),
             "^attention: q, k and v have shapes .*above rank 4 their batch axes"),
            (lambda: kiln.ops.softmax(np.ones((3, 4), np.int32)), "^softmax: input X of softmax"),
            (lambda: kiln.ops.attention(*[np.zeros((2, 2, 0, 7, 8), np.float32)] * 3),
             r"attention: .*dimension 0 is 0.*\(q, k and v of shapes \(2, 2, 0, 7, 8\)"),
            (lambda: kiln.ops.rms_norm(f32, np.ones(4, np.float32), eps=1e39),
             "^rms_norm: eps is 1e[+]39; it must be at least 0 and at most 1e30"),
            (lambda: kiln.ops.matmul(f32, np.ones((4, 2), np.float32), activation="swish"),
             "unknown activation op 'swish'; known: neg, abs, exp")):
        with pytest.raises(kiln.InvalidArgument, match=message) as e:
            call()
        assert "popcount" not in str(e.value) and "isnan" not in str(e.value)


def test_tensors_of_two_devices_do_not_mix(rng):
    a = kiln.Device(impl="wgpu", backend="vulkan")
    b = kiln.Device(impl="dawn", backend="vulkan")
    x = kiln.tensor(np.ones(4, np.float32), a)
    y = kiln.tensor(np.ones(4, np.float32), b)
    for mix in (lambda: kiln.ops.add(x, y), lambda: kiln.ops.layer_norm(x, y, y),
                lambda: kiln.ops.rms_norm(x, y), lambda: kiln.ops.matmul(x.reshape(1, 4), y.reshape(4, 1)),
                lambda: kiln.ops.elementwise_chain(x, [("add", y)])):
        with pytest.raises(kiln.InvalidArgument, match="on different devices"):
            mix()
    # Empty tensors too: refused as the same call with elements would be.
    ex = kiln.tensor(np.zeros((0, 3), np.float32), a)
    ey = kiln.tensor(np.zeros((0, 3), np.float32), b)
    for mix in (lambda: ex + ey, lambda: kiln.ops.where(ex > 0, ex, ey),
                lambda: ex @ kiln.tensor(np.ones((3, 2), np.float32), b),
                lambda: kiln.ops.concat([ex, kiln.tensor(np.ones((2, 3), np.float32), b)]),
                lambda: kiln.ops.concat([ex, ey]),
                lambda: kiln.ops.layer_norm(ex, y[:3], y[:3]),
                lambda: kiln.ops.matmul(kiln.tensor(np.zeros((3, 0), np.float32), a),
                                        kiln.tensor(np.zeros((0, 4), np.float32), a), bias=y),
                lambda: kiln.ops.matmul_int8(kiln.tensor(np.zeros((0, 8), np.int8), a),
                                             kiln.tensor(np.zeros((2, 8), np.int8), b)),
                lambda: kiln.ops.conv2d(kiln.tensor(np.zeros((0, 5, 5, 3), np.float32), a),
                                        kiln.tensor(np.ones((3, 3, 3, 4), np.float32), b))):
        with pytest.raises(kiln.InvalidArgument, match="^[a-z0-9_]+: its tensors are on different"):
            mix()
    with pytest.raises(kiln.InvalidArgument, match="^logical_or: argument 1 is on another device"):
        kiln.ops.logical_or(x, y)
    # A numpy operand goes to the device of the tensors it meets.
    a_ones = np.ones(4, np.float32)
    for out in (kiln.ops.layer_norm(a_ones, y, y), kiln.ops.rms_norm(a_ones, y),
                kiln.ops.elementwise_chain(a_ones, [("add", y)]), kiln.ops.add(a_ones, y)):
        assert out.device is b
    np.testing.assert_array_equal(kiln.ops.elementwise_chain(a_ones, [("add", y)]).numpy(),
                                  np.full(4, 2, np.float32))


# ---------------------------------------------------------------------------
# Reductions over axes, arg-reductions, softmax along an axis, norms

NUMPY_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
REDUCE_FN = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin", "prod": "prod"}


# sum over every schedule path (a workgroup or a thread per output, rows
# kept in registers or read again); each other op over three of them.
REDUCE_CASES = [((1,), None, False), ((7, 33), 1, True), ((7, 33), 0, False),
                ((33, 1000), None, True), ((1000, 7), -2, False), ((5, 7, 33), (0, 2), False),
                ((2, 3, 5, 7), (1, -2), True), ((1, 4097), -1, False)]


@pytest.mark.parametrize("op,shape,axis,keepdims",
                         [("sum",) + c for c in REDUCE_CASES] +
                         [(op,) + REDUCE_CASES[i] for op in ("mean", "max", "min", "prod")
                          for i in (1, 4, 5)], ids=str)
def test_reduce_axes(device, rng, op, shape, axis, keepdims):
    a = rng.uniform(-1, 1, shape).astype(np.float32)
    if op == "prod":
        a = rng.uniform(0.99, 1.01, shape).astype(np.float32)
    y = getattr(kiln.ops, REDUCE_FN[op])(kiln.tensor(a, device), axis, keepdims=keepdims)
    want = NUMPY_REDUCE[op](a.astype(np.float64), axis=axis, keepdims=keepdims)
    assert y.shape == np.shape(want) and y.dtype == np.float32
    _close(y.numpy(), want, 1e-3 if op == "prod" else 1e-4)


def test_reduce_max_min_propagate_nan(device, rng):
    a = rng.uniform(-1, 1, (4, 33)).astype(np.float32)
    a[0, 0] = a[1, 16] = a[2, 32] = np.nan
    a[3] = -np.inf
    x = kiln.tensor(a, device)
    for fn, ref in ((kiln.ops.amax, np.max), (kiln.ops.amin, np.min)):
        got = fn(x, 1).numpy()
        np.testing.assert_array_equal(np.isnan(got), [True, True, True, False])
        assert got[3] == -np.inf
        np.testing.assert_array_equal(np.isnan(fn(x, 0).numpy()), np.isnan(ref(a, 0)))
    assert np.isnan(kiln.ops.max(x).numpy())


ARG_CASES = [((1,), -1, False), ((7, 33), -1, False), ((33, 1000), 1, True), ((1000, 7), 0, False),
             ((5, 7, 33), 1, False), ((2, 4097), -1, True), ((7, 33), None, False)]


@pytest.mark.parametrize("op,shape,axis,keepdims",
                         [("argmax",) + c for c in ARG_CASES] +
                         [("argmin",) + ARG_CASES[i] for i in (1, 3, 4)], ids=str)
def test_arg_reduce(device, rng, op, shape, axis, keepdims):
    # Few distinct values: many ties, which must resolve to the first index.
    a = rng.integers(-3, 4, shape).astype(np.float32)
    y = getattr(kiln.ops, op)(kiln.tensor(a, device), axis=axis, keepdims=keepdims)
    want = getattr(np, op)(a, axis=axis, keepdims=keepdims)
    assert y.dtype == np.int32 and y.shape == np.shape(want)
    np.testing.assert_array_equal(y.numpy(), want)


def test_arg_reduce_edge_values(device):
    a = np.array([[1, np.nan, 3, np.nan], [np.inf, np.inf, -np.inf, -np.inf],
                  [-0.0, 0.0, -1, 2], [5, 5, 5, np.nan]], np.float32)
    x = kiln.tensor(a, device)
    np.testing.assert_array_equal(kiln.ops.argmax(x).numpy(), [1, 0, 3, 3])
    np.testing.assert_array_equal(kiln.ops.argmin(x).numpy(), [1, 2, 2, 3])
    np.testing.assert_array_equal(kiln.ops.argmax(x).numpy(), np.argmax(a, -1))
    np.testing.assert_array_equal(kiln.ops.argmin(x).numpy(), np.argmin(a, -1))


def _softmax64(a, axis):
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((1,), -1), ((7, 33), -1), ((33, 1000), 1),
                                        ((1000, 7), 0), ((5, 7, 33), 1), ((2, 4097), -1)],
                         ids=str)
def test_softmax_and_log_softmax(device, rng, shape, axis):
    a = rng.uniform(-50, 100, shape).astype(np.float32)
    x = kiln.tensor(a, device)
    want = _softmax64(a, axis)
    y = kiln.ops.softmax(x, axis).numpy()
    _close(y, want, 1e-5)
    np.testing.assert_allclose(y.sum(axis), 1, rtol=1e-4)
    a64 = a.astype(np.float64)
    m = a64.max(axis, keepdims=True)
    want_log = a64 - m - np.log(np.exp(a64 - m).sum(axis, keepdims=True))
    _close(kiln.ops.log_softmax(x, axis=axis).numpy(), want_log, 1e-5)


def test_softmax_is_one_kernel_equal_to_the_sequence(device, rng):
    a = rng.uniform(-50, 100, (33, 100)).astype(np.float32)
    x = kiln.tensor(a, device)
    one = kiln.ops.softmax(x).numpy()
    seq = kiln.ops.run(("softmax_sequence", x._sig),
                       lambda d: kiln._kiln.ops.softmax(d, x._type), x).numpy()
    np.testing.assert_allclose(one, seq, rtol=1e-5, atol=1e-7)
    assert len(device._cache[("softmax_axis", 1, x._sig)].wgsl) == 1


@pytest.mark.parametrize("shape", [(1, 1), (33,), (7, 33), (2, 1000), (3, 2, 4097)], ids=str)
def test_layer_norm_and_rms_norm(device, rng, shape):
    # Around 100: a one-pass variance would lose the digits that matter.
    a = (100 + rng.standard_normal(shape)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    b = rng.uniform(-1, 1, shape[-1]).astype(np.float32)
    x = kiln.tensor(a, device)
    a64 = a.astype(np.float64)
    mean = a64.mean(-1, keepdims=True)
    var = a64.var(-1, keepdims=True)
    want = (a64 - mean) / np.sqrt(var + 1e-5) * g + b
    _close(kiln.ops.layer_norm(x, kiln.tensor(g, device), b).numpy(), want, 5e-4)
    want = a64 / np.sqrt((a64 ** 2).mean(-1, keepdims=True) + 1e-3) * g
    _close(kiln.ops.rms_norm(x, g, eps=1e-3).numpy(), want, 1e-5)


# ---------------------------------------------------------------------------
# Matrix multiplication


# Each matmul kernel takes a second or more to compile on a CPU driver (the
# drivers cache them after the first run): few shapes, each covering a case.
# The 1-D cases reuse the kernels of [1, 1] @ [1, 1] and [7, 33] @ [33, 1].
@pytest.mark.parametrize("sa,sb", [((1, 1), (1, 1)), ((7, 33), (33, 1)), ((33, 1000), (1000, 7)),
                                   ((130, 7), (7, 129)), ((3, 1, 7, 33), (4, 33, 5)),
                                   ((1,), (1, 1)), ((1,), (1,)), ((7, 33), (33,))], ids=str)
def test_matmul(device, rng, sa, sb):
    a = rng.uniform(-1, 1, sa).astype(np.float32)
    b = rng.uniform(-1, 1, sb).astype(np.float32)
    y = kiln.ops.matmul(kiln.tensor(a, device), kiln.tensor(b, device))
    want = np.matmul(a.astype(np.float64), b)
    assert y.shape == want.shape
    _close(y.numpy(), want, 1e-4)


def test_matmul_transposes_and_epilogue(device, rng):
    m, k, n = 33, 7, 65
    a = rng.uniform(-1, 1, (2, k, m)).astype(np.float32)  # transposed
    b = rng.uniform(-1, 1, (n, k)).astype(np.float32)     # transposed
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    res = rng.uniform(-1, 1, (2, m, n)).astype(np.float32)
    x = kiln.tensor(a, device)
    y = kiln.ops.matmul(x, kiln.tensor(b, device), transpose_a=True, transpose_b=True,
                        bias=bias, activation="relu", residual=res)
    prod = np.matmul(np.swapaxes(a, -1, -2).astype(np.float64), b.T)
    _close(y.numpy(), np.maximum(prod + bias, 0) + res, 1e-5)
    y = kiln.ops.matmul(x, b.T.copy(), transpose_a=True, activation="tanh")
    _close(y.numpy(), np.tanh(prod), 1e-5)


def test_matmul_f16_accumulation(device, rng):
    a = rng.uniform(-1, 1, (33, 70)).astype(np.float32)
    b = rng.uniform(-1, 1, (70, 129)).astype(np.float32)
    with pytest.raises(kiln.InvalidArgument, match="accumulate must be"):
        kiln.ops.matmul(a, b, accumulate="float64")
    with pytest.raises(kiln.InvalidArgument, match="f16 accumulation needs f16 inputs"):
        kiln.ops.matmul(kiln.tensor(a, device), b, accumulate="float16")
    require_feature(device, "shader-f16")
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    y = kiln.ops.matmul(kiln.tensor(a16, device), kiln.tensor(b16, device), accumulate="float16")
    assert y.dtype == np.float16
    exact = np.matmul(a16.astype(np.float64), b16.astype(np.float64))
    magnitude = np.matmul(np.abs(a16.astype(np.float64)), np.abs(b16.astype(np.float64)))
    # f16 rounding at each of the 70 steps: within 8 units (2^-11) of the
    # sum of magnitudes, where one product left out would be about 0.25.
    err = np.abs(y.numpy().astype(np.float64) - exact)
    assert np.all(err <= 8 / 2048 * magnitude + np.abs(exact) / 1024), err.max()


def _int8(rng, shape):
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    x.flat[0], x.flat[-1] = -128, 127
    return x


@pytest.mark.parametrize("sa,sb", [((1, 4), (1, 4)), ((7, 68), (33, 68)), ((100, 132), (7, 132)),
                                   ((33, 4), (100, 4)), ((64, 256), (128, 256)),
                                   ((2, 3, 33, 20), (3, 7, 20)), ((5, 1, 7, 8), (1, 3, 9, 8))],
                         ids=str)
def test_matmul_int8(device, rng, sa, sb):
    a, b = _int8(rng, sa), _int8(rng, sb)
    y = kiln.ops.matmul_int8(kiln.tensor(a, device), kiln.tensor(b, device))
    want = np.matmul(a.astype(np.int64), np.swapaxes(b, -1, -2).astype(np.int64))
    assert y.dtype == np.int32 and y.shape == want.shape
    np.testing.assert_array_equal(y.numpy(), want)


def test_matmul_int8_extremes_and_errors(device, rng):
    # Every product 16384: K = 4096 sums to 2^26. numpy operands go to b's device.
    a = np.full((3, 4096), -128, np.int8)
    b = np.where(rng.integers(0, 2, (5, 4096)) == 1, 127, -128).astype(np.int8)
    y = kiln.ops.matmul_int8(a, kiln.tensor(b, device))
    np.testing.assert_array_equal(y.numpy(), a.astype(np.int64) @ b.astype(np.int64).T)
    x = kiln.tensor(_int8(rng, (7, 8)), device)
    bad = kiln.InvalidArgument
    with pytest.raises(bad, match=r"K = 5 \(the last axis of a \[7, 5\]\) is not a multiple of 4"):
        kiln.ops.matmul_int8(kiln.tensor(_int8(rng, (7, 5)), device), x)
    with pytest.raises(bad, match=r"matmul_int8: b is float32\[3, 8\]; it must be int8"):
        kiln.ops.matmul_int8(x, kiln.tensor(np.zeros((3, 8), np.float32), device))
    with pytest.raises(bad, match="it must be int8"):
        kiln.ops.matmul_int8(x, kiln.tensor(np.zeros((3, 8), np.uint8), device))
    with pytest.raises(bad, match="rank 2 to 4"):
        kiln.ops.matmul_int8(kiln.tensor(_int8(rng, (8,)), device), x)
    with pytest.raises(bad, match=r"a is \[7, 8\] and b \[3, 12\]: the contraction dimension K"):
        kiln.ops.matmul_int8(x, kiln.tensor(_int8(rng, (3, 12)), device))


def test_matmul_int8_empty_operands(device, rng):
    # As matmul (float): an empty result, or zeros where K is 0; no kernel runs.
    def z(*shape, dtype=np.int8):
        return kiln.tensor(np.zeros(shape, dtype), device)
    for sa, sb in [((0, 8), (3, 8)), ((2, 8), (0, 8)), ((2, 0), (3, 0)), ((0, 2, 8), (3, 8)),
                   ((2, 1, 3, 0), (4, 5, 0)), ((0, 0), (0, 0))]:
        a, b = np.zeros(sa, np.int8), np.zeros(sb, np.int8)
        y = kiln.ops.matmul_int8(kiln.tensor(a, device), kiln.tensor(b, device))
        want = np.matmul(a.astype(np.int32), np.swapaxes(b, -1, -2).astype(np.int32))
        assert y.dtype == np.int32 and y.shape == want.shape, (sa, sb)
        np.testing.assert_array_equal(y.numpy(), want)
    # The same call with elements refuses these; the messages name the operands' shapes.
    bad = kiln.InvalidArgument
    for call, message in [
            (lambda: kiln.ops.matmul_int8(z(0, 8), z(3, 12)),
             r"a is \[0, 8\] and b \[3, 12\]: the contraction dimension K differs "
             r"\(8 against 12\)"),
            (lambda: kiln.ops.matmul_int8(z(2, 0), z(3, 4)), r"K differs \(0 against 4\)"),
            (lambda: kiln.ops.matmul_int8(z(0, 6), z(3, 6)),
             r"K = 6 \(the last axis of a \[0, 6\]\) is not a multiple of 4"),
            (lambda: kiln.ops.matmul_int8(z(0, 8, dtype=np.float32), z(3, 8)),
             r"a is float32\[0, 8\]; it must be int8"),
            (lambda: kiln.ops.matmul_int8(z(0, 2, 8), z(3, 3, 8)),
             r"batch dimensions: shapes \[0\] and \[3\] do not broadcast"),
            (lambda: kiln.ops.matmul_int8(z(0), z(3, 8)),
             r"a has shape \[0\]; it needs rank 2 to 4"),
            (lambda: kiln.ops.matmul_int8(z(0, 2**33), z(0, 2**33)),
             r"a has shape \[0, 8589934592\]; a kernel's operand holds at most 2\^30 words"),
            # (with elements too: the user's shape, not the packed [..., K/4])
            (lambda: kiln.ops.matmul_int8(z(1, 1, 1, 1, 2, 8), z(3, 8)),
             r"a has shape \[1, 1, 1, 1, 2, 8\]; it needs rank 2 to 4")]:
        with pytest.raises(bad, match=message):
            call()


# ---------------------------------------------------------------------------
# Data movement, where and cast


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_permute_transpose_reshape(device, rng, dtype):
    a = rng.integers(-1000, 1000, (2, 3, 5, 7)).astype(dtype)
    x = kiln.tensor(a, device)
    for axes in ([3, 1, 0, 2], [0, 1, 3, 2], [-1, 0, 1, -2]):
        y = kiln.ops.permute(x, axes)
        assert y.dtype == dtype
        np.testing.assert_array_equal(y.numpy(), np.transpose(a, axes))
    np.testing.assert_array_equal(kiln.ops.transpose(x).numpy(), a.T)
    v = kiln.tensor(a[0, 0, 0], device)
    np.testing.assert_array_equal(kiln.ops.transpose(v).numpy(), a[0, 0, 0])
    for shape in ((210,), (6, -1), (7, 5, 3, 2), (1, 1000 // 1000, 210)):
        np.testing.assert_array_equal(kiln.ops.reshape(x, shape).numpy(), a.reshape(shape))
    np.testing.assert_array_equal(kiln.ops.reshape(x, -1).numpy(), a.reshape(-1))


def test_zero_d_permute_transpose_and_pad(device):
    # numpy's transpose and pad of a 0-d array: a 0-d copy (no axis to move or pad).
    for a in (np.array(2.5, np.float32), np.array(-7, np.int32), np.array(True)):
        x = kiln.tensor(a, device)
        for y, want in [(x.T, a.T), (x.transpose(), np.transpose(a)),
                        (kiln.ops.transpose(x), np.transpose(a)),
                        (kiln.ops.permute(x, []), np.transpose(a, ())),
                        (kiln.ops.pad(x, [], []), np.pad(a, 0)),
                        (kiln.ops.pad(x, 1, 2), np.pad(a, [(1, 2)]))]:
            assert y.shape == () and y.dtype == a.dtype and y is not x
            np.testing.assert_array_equal(y.numpy(), want)
    i = kiln.tensor(np.array(3, np.int32), device)
    np.testing.assert_array_equal(kiln.ops.pad(i, 1, 1, value=5).numpy(), 3)
    with pytest.raises(kiln.InvalidArgument, match="value 0.5 is not an i32"):
        kiln.ops.pad(i, 1, 1, value=0.5)  # as for a tensor with axes
    with pytest.raises(kiln.InvalidArgument, match="permute: axes must list each of x's 0 axes"):
        kiln.ops.permute(i, [0])


def test_concat(device, rng):
    parts = [rng.standard_normal((7, n, 3)).astype(np.float32) for n in (1, 33, 5, 1)]
    ts = [kiln.tensor(p, device) for p in parts]
    for k in (2, 3, 4):
        np.testing.assert_array_equal(kiln.ops.concat(ts[:k], axis=1).numpy(),
                                      np.concatenate(parts[:k], axis=1))
    np.testing.assert_array_equal(kiln.ops.concat([ts[0], parts[0]], axis=-1).numpy(),
                                  np.concatenate([parts[0], parts[0]], -1))
    i = [rng.integers(-9, 9, (n,)).astype(np.int32) for n in (1000, 7)]
    np.testing.assert_array_equal(kiln.ops.concat([kiln.tensor(v, device) for v in i]).numpy(),
                                  np.concatenate(i))
    np.testing.assert_array_equal(kiln.ops.concat([ts[1]]).numpy(), parts[1])
    with pytest.raises(kiln.InvalidArgument, match=r"^concat: the tensors have dtypes int8, uint8"):
        kiln.ops.concat([np.ones(4, np.int8), np.ones(4, np.uint8)])
    with pytest.raises(kiln.InvalidArgument, match=r"^concat: .*uint32, int32"):
        kiln.ops.concat([np.ones(2, np.uint32), np.ones(2, np.int32)])


def test_concat_of_more_tensors_than_a_kernel_binds(device, rng):
    # Dawn binds 10 storage buffers per kernel: 9 inputs and the output.
    most = device.limits["max_storage_buffers_per_shader_stage"]
    for count in (most + 1, 2 * most + 3):
        parts = [rng.standard_normal((3, int(n), 2)).astype(np.float32)
                 for n in rng.integers(1, 6, count)]
        ts = [kiln.tensor(p, device) for p in parts]
        np.testing.assert_array_equal(kiln.ops.concat(ts, axis=1).numpy(),
                                      np.concatenate(parts, axis=1))
        # The same tensor many times, and bools.
        np.testing.assert_array_equal(kiln.ops.concat([ts[0]] * count, axis=-1).numpy(),
                                      np.concatenate([parts[0]] * count, axis=-1))
        flags = [p > 0 for p in parts]
        np.testing.assert_array_equal(
            kiln.ops.concat([kiln.tensor(f, device) for f in flags], axis=1).numpy(),
            np.concatenate(flags, axis=1))
    many = [kiln.tensor(np.ones((2, 3), np.float32), device)] * (most + 1)
    with pytest.raises(kiln.InvalidArgument, match="differ in dtype, rank or an axis other"):
        kiln.ops.concat(many + [kiln.tensor(np.ones((3, 3), np.float32), device)], axis=1)
    with pytest.raises(kiln.InvalidArgument, match="float32, int32; they must have one"):
        kiln.ops.concat(many + [kiln.tensor(np.ones((2, 3), np.int32), device)], axis=0)
    with pytest.raises(kiln.InvalidArgument, match="differ in dtype, rank or an axis other"):
        kiln.ops.concat(many + [kiln.tensor(np.ones((1, 2, 3), np.float32), device)], axis=0)


SLICES = [(slice(None), slice(None, None, -1)), (slice(1, -1, 2), slice(-3, None)),
          (slice(None, None, -3), slice(30, 2, -7)), (slice(-100, 100), slice(5, 6)),
          (slice(6, None, -1), slice(None, -40, -1))]


@pytest.mark.parametrize("index", SLICES, ids=str)
def test_slice(device, rng, index):
    a = rng.standard_normal((7, 33)).astype(np.float32)
    x = kiln.tensor(a, device)
    want = a[index]
    got = kiln.ops.slice(x, [s.start for s in index], [s.stop for s in index],
                         [s.step for s in index])
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(x[index].numpy(), want)


def test_getitem(device, rng):
    a = rng.integers(-99, 99, (5, 7, 33)).astype(np.int32)
    x = kiln.tensor(a, device)
    for key in (1, -1, (2, 3), (slice(None), -2), (..., 5), (0, ..., slice(None, None, -4)),
                (slice(4, 0, -2), 6, slice(1, 33, 8)), (1, 2, 3), Ellipsis, np.int64(3)):
        want = a[key]
        got = x[key]
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(IndexError, match="out of bounds"):
        x[5]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(TypeError, match="ints, slices"):
        x[[0, 1]]
    assert x[3:3].shape == (0,) + tuple(x.shape[1:])  # empty, as numpy


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_gather(device, rng, dtype):
    table = rng.integers(-1000, 1000, (33, 7)).astype(dtype)
    t = kiln.tensor(table, device)
    for shape in ((1,), (1000,), (3, 5), (2, 3, 4)):
        idx = rng.integers(0, 33, shape).astype(np.int32)
        got = kiln.ops.gather(t, kiln.tensor(idx, device))
        np.testing.assert_array_equal(got.numpy(), table[idx])
    idx = np.array([-5, 0, 32, 33, 2**31 - 1, -2**31], np.int64)  # clamped into [0, 33)
    np.testing.assert_array_equal(kiln.ops.gather(t, idx).numpy(),
                                  table[np.clip(idx, 0, 32)])


def test_pad(device, rng):
    a = rng.standard_normal((7, 33)).astype(np.float32)
    x = kiln.tensor(a, device)
    np.testing.assert_array_equal(kiln.ops.pad(x, [1, 0], [2, 5], value=-1.5).numpy(),
                                  np.pad(a, [(1, 2), (0, 5)], constant_values=-1.5))
    np.testing.assert_array_equal(kiln.ops.pad(x, 3, 0).numpy(), np.pad(a, [(3, 0), (3, 0)]))
    i = rng.integers(-9, 9, (1000,)).astype(np.int32)
    np.testing.assert_array_equal(kiln.ops.pad(i, [1], [1], 7).numpy(),
                                  np.pad(i, 1, constant_values=7))
    # A bool fill is numpy's 0 or 1, for int and float tensors alike.
    for value in (True, np.bool_(True), False):
        np.testing.assert_array_equal(kiln.ops.pad(i, [2], [0], value).numpy(),
                                      np.pad(i, (2, 0), constant_values=value))
        np.testing.assert_array_equal(kiln.ops.pad(x, 1, 1, value).numpy(),
                                      np.pad(a, 1, constant_values=value))


def test_where(device, rng):
    a = rng.standard_normal((7, 33)).astype(np.float32)
    b = rng.standard_normal((33,)).astype(np.float32)
    c = rng.random((7, 1)) < 0.5
    want = np.where(c, a, b)
    for cond in (c, c.astype(np.int32), kiln.tensor(c, device), c.astype(np.float32)):
        got = kiln.ops.where(cond, kiln.tensor(a, device), b)
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(kiln.ops.where(c, a, 0.5).numpy(), np.where(c, a, 0.5))
    np.testing.assert_array_equal(kiln.ops.where(c, -2.0, kiln.tensor(b, device)).numpy(),
                                  np.where(c, np.float32(-2), b))
    f = np.array([np.nan, -0.0, 0.0, 1.0], np.float32)  # NaN is true, -0 false
    np.testing.assert_array_equal(
        kiln.ops.where(kiln.tensor(f, device), np.ones(4, np.float32), np.zeros(4, np.float32))
        .numpy(), [1, 0, 0, 1])
    i = rng.integers(-9, 9, (1000,)).astype(np.int32)
    np.testing.assert_array_equal(kiln.ops.where(i > 0, i, np.int32(0)).numpy(),
                                  np.where(i > 0, i, 0))


def test_cast(device, rng):
    a = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, -0.0, 1e-8], np.float32)
    x = kiln.tensor(a, device)
    i = kiln.ops.cast(x, "int32")
    assert i.dtype == np.int32
    # Saturating at the largest f32 below 2^31 (WGSL's rule): 2^31 - 128.
    np.testing.assert_array_equal(
        i.numpy(), [0, 2**31 - 128, -2**31, 2**31 - 128, -2**31, 2, -2, 0, 0])
    np.testing.assert_array_equal(x.astype(np.int32).numpy(), i.numpy())
    v = rng.integers(-2**24, 2**24, (7, 33)).astype(np.int32)
    f = kiln.tensor(v, device).astype("float32")
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f.numpy(), v.astype(np.float32))


# ---------------------------------------------------------------------------
# float16 and argument errors


def test_float16_more(device, rng):
    require_feature(device, "shader-f16")
    a = rng.uniform(-1, 1, (7, 33)).astype(np.float16)
    x = kiln.tensor(a, device)
    a32 = a.astype(np.float32)
    s = kiln.ops.sum(x, 0)
    assert s.dtype == np.float16
    np.testing.assert_allclose(s.numpy(), a32.sum(0), rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(kiln.ops.amax(x, 1).numpy(), a.max(1))
    np.testing.assert_array_equal(kiln.ops.argmax(x).numpy(), np.argmax(a, -1))
    sm = kiln.ops.softmax(x, 0).numpy()
    assert sm.dtype == np.float16
    np.testing.assert_allclose(sm, _softmax64(a32, 0), rtol=1e-2, atol=1e-3)
    g = rng.uniform(0.5, 1.5, 33).astype(np.float16)
    b = rng.uniform(-1, 1, 33).astype(np.float16)
    ln = kiln.ops.layer_norm(x, g, b).numpy()
    want = (a32 - a32.mean(1, keepdims=True)) / np.sqrt(a32.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(ln, want, rtol=1e-2, atol=2e-2)
    m = rng.uniform(-1, 1, (33, 65)).astype(np.float16)
    y = kiln.ops.matmul(x, m)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.numpy(), a32 @ m.astype(np.float32), rtol=1e-2, atol=2e-2)
    np.testing.assert_array_equal(kiln.ops.transpose(x).numpy(), a.T)
    np.testing.assert_array_equal(x[::-1, 3].numpy(), a[::-1, 3])
    np.testing.assert_array_equal(x.astype(np.float32).numpy(), a32)
    np.testing.assert_array_equal(kiln.tensor(a32, device).astype("float16").numpy(), a)


def test_errors_more(device):
    x = kiln.tensor(np.ones((7, 2), np.float32), device)
    bad = kiln.InvalidArgument
    with pytest.raises(bad, match="reduce sum: axis is 2; for a tensor of rank 2"):
        kiln.ops.sum(x, 2)
    with pytest.raises(bad, match="lists an axis twice"):
        kiln.ops.mean(x, (0, -2))
    with pytest.raises(bad, match="axis must be an int; got bool"):
        kiln.ops.sum(x, True)
    with pytest.raises(bad, match="argmax: axis is -3"):
        kiln.ops.argmax(x, -3)
    with pytest.raises(bad, match="softmax: axis"):
        kiln.ops.softmax(x, 5)
    with pytest.raises(bad, match="layer_norm: gamma has shape \\(3,\\); it must be \\(2,\\)"):
        kiln.ops.layer_norm(x, np.ones(3, np.float32), np.ones(2, np.float32))
    with pytest.raises(bad, match="layer_norm: eps is -1"):
        kiln.ops.layer_norm(x, np.ones(2, np.float32), np.ones(2, np.float32), eps=-1)
    with pytest.raises(bad, match="layer_norm: eps is 1e-46, which f32 arithmetic takes as 0"):
        kiln.ops.layer_norm(x, np.ones(2, np.float32), np.ones(2, np.float32), eps=1e-46)
    with pytest.raises(bad, match="rms_norm: eps is 1e-40, which f32 arithmetic takes as 0"):
        kiln.ops.rms_norm(np.zeros((0, 2), np.float32), np.ones(2, np.float32), eps=1e-40)
    with pytest.raises(bad, match="rms_norm: eps must be a number"):
        kiln.ops.rms_norm(x, np.ones(2, np.float32), eps="small")
    with pytest.raises(bad, match="matmul"):
        kiln.ops.matmul(x, np.ones((3, 5), np.float32))
    with pytest.raises(bad, match="activation"):
        kiln.ops.matmul(x, np.ones((2, 5), np.float32), activation="nope")
    with pytest.raises(bad, match="activation must be a unary op name"):
        kiln.ops.matmul(x, np.ones((2, 5), np.float32), activation=3)
    with pytest.raises(bad, match="permute: axes must list each"):
        kiln.ops.permute(x, [0])
    with pytest.raises(bad, match="perm"):
        kiln.ops.permute(x, [1, 1])
    with pytest.raises(bad, match="reshape: the new shape \\[5, 5\\] has 25 elements"):
        kiln.ops.reshape(x, (5, 5))
    with pytest.raises(bad, match="reshape: shape entry 0 must be an int"):
        kiln.ops.reshape(x, (2.0, 7))
    with pytest.raises(bad, match="concat: .*differs"):
        kiln.ops.concat([x, np.ones((3, 3), np.float32)], axis=1)
    with pytest.raises(bad, match="concat: tensors must be a non-empty list"):
        kiln.ops.concat([])
    with pytest.raises(bad, match="slice: steps entry 1 is 0"):
        kiln.ops.slice(x, [0, 0], [1, 1], [1, 0])
    with pytest.raises(bad, match="slice: starts must be a list of at most 2"):
        kiln.ops.slice(x, [0, 0, 0])
    with pytest.raises(bad, match="gather: indices must be integers"):
        kiln.ops.gather(x, np.ones(3, np.float32))
    with pytest.raises(bad, match="Indices of gather has dtype f32; it must be i32"):
        kiln.ops.gather(x, kiln.tensor(np.ones(3, np.float32), device))
    with pytest.raises(bad, match="pad: before must be an int or 2 ints"):
        kiln.ops.pad(x, [1], [1, 1])
    with pytest.raises(bad, match="pad"):
        kiln.ops.pad(x, [-1, 0], [0, 0])
    with pytest.raises(bad, match="where: the number 2147483648 is not an int32 value"):
        kiln.ops.where(x, 2**31, 2)
    with pytest.raises(bad, match="where: a is int8 and b float32; an int8 goes with an int8"):
        kiln.ops.where(x > 0, kiln.tensor(np.ones(x.shape, np.int8), device), x)
    with pytest.raises(bad, match="cast: dtype int16 is not one kiln casts to"):
        kiln.ops.cast(x, "int16")
    with pytest.raises(bad, match="cast: dtype"):
        kiln.ops.cast(x, object())


# ---------------------------------------------------------------------------
# Convolution, pooling and attention


def _conv_ref(x, w, stride, pad, dil, groups):
    """NHWC x, HWIO w, in float64."""
    n, h, wd, c = x.shape
    kh, kw, cg, f = w.shape
    fg = f // groups
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    xp = np.zeros((n, h + 2 * pad[0], wd + 2 * pad[1], c))
    xp[:, pad[0]:pad[0] + h, pad[1]:pad[1] + wd, :] = x
    y = np.zeros((n, oh, ow, f))
    for a in range(kh):
        for b in range(kw):
            patch = xp[:, a * dil[0]:a * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                       b * dil[1]:b * dil[1] + stride[1] * (ow - 1) + 1:stride[1], :]
            for g in range(groups):
                y[..., g * fg:(g + 1) * fg] += patch[..., g * cg:(g + 1) * cg] @ w[a, b, :, g * fg:(g + 1) * fg]
    return y


@pytest.mark.parametrize("case", [
    dict(x=(2, 7, 9, 8), w=(3, 3, 8, 20), stride=1, padding=1, dilation=1, groups=1),
    dict(x=(1, 11, 10, 5), w=(3, 2, 5, 33), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=1),
    dict(x=(2, 6, 5, 6), w=(3, 3, 1, 12), stride=2, padding=1, dilation=1, groups=6),
    # Whole tiles (X gathered four channels at a time), and two groups of 16 filters.
    dict(x=(2, 8, 8, 16), w=(3, 3, 16, 64), stride=1, padding=1, dilation=1, groups=1),
    dict(x=(1, 5, 6, 8), w=(3, 3, 4, 32), stride=1, padding=0, dilation=1, groups=2),
])
def test_conv2d(device, rng, case):
    x = rng.uniform(-1, 1, case["x"]).astype(np.float32)
    w = rng.uniform(-1, 1, case["w"]).astype(np.float32)
    f = case["w"][3]
    bias = rng.uniform(-1, 1, f).astype(np.float32)
    pair = lambda v: v if isinstance(v, tuple) else (v, v)
    want = _conv_ref(x.astype(np.float64), w, pair(case["stride"]), pair(case["padding"]),
                     pair(case["dilation"]), case["groups"]) + bias
    y = kiln.ops.conv2d(kiln.tensor(x, device), w, stride=case["stride"], padding=case["padding"],
                        dilation=case["dilation"], groups=case["groups"], bias=bias,
                        activation="relu")
    _close(y.numpy(), np.maximum(want, 0), 1e-4)
    # NCHW with OIHW weights gives the same result.
    y = kiln.ops.conv2d(kiln.tensor(x.transpose(0, 3, 1, 2), device), w.transpose(3, 2, 0, 1),
                        layout="NCHW", stride=case["stride"], padding=case["padding"],
                        dilation=case["dilation"], groups=case["groups"])
    _close(y.numpy(), (want - bias).transpose(0, 3, 1, 2), 1e-4)


def test_conv2d_random_geometries(device, rng):
    """Ten geometries drawn from a fixed seed (strides, dilations, padding,
    groups, channel counts that do and do not allow vector gathers), on fresh
    random data with a NaN and a -0.0, in both layouts, against the float64
    reference."""
    shapes = np.random.default_rng(8)
    for _ in range(10):
        groups = int(shapes.choice([1, 1, 2, 4]))
        cg, fg = int(shapes.choice([1, 3, 4, 8, 12])), int(shapes.choice([16, 20, 32, 48]))
        kh, kw = int(shapes.integers(1, 4)), int(shapes.integers(1, 4))
        st = (int(shapes.integers(1, 3)), int(shapes.integers(1, 3)))
        dil = (int(shapes.integers(1, 3)), int(shapes.integers(1, 3)))
        pad = (int(shapes.integers(0, 3)), int(shapes.integers(0, 3)))
        n = int(shapes.integers(1, 3))
        h, w = int(shapes.integers(kh * dil[0], 12)), int(shapes.integers(kw * dil[1], 12))
        x = rng.uniform(-1, 1, (n, h, w, cg * groups)).astype(np.float32)
        wt = rng.uniform(-1, 1, (kh, kw, cg, fg * groups)).astype(np.float32)
        # A NaN reaches exactly the outputs whose windows hold it (its group's
        # filters); -0.0 is an ordinary zero.
        x[0, h - 1, 0, 0] = np.nan
        x[-1, 0, w - 1, -1] = -0.0
        want = _conv_ref(x.astype(np.float64), wt, st, pad, dil, groups)
        y = kiln.ops.conv2d(kiln.tensor(x, device), wt, stride=st, padding=pad, dilation=dil,
                            groups=groups)
        _close(y.numpy(), want, 1e-4)
        y = kiln.ops.conv2d(kiln.tensor(x.transpose(0, 3, 1, 2), device), wt.transpose(3, 2, 0, 1),
                            layout="NCHW", stride=st, padding=pad, dilation=dil, groups=groups)
        _close(y.numpy(), want.transpose(0, 3, 1, 2), 1e-4)


@pytest.mark.parametrize("groups", [1, 16])
def test_conv2d_weights_that_are_not_finite_meet_the_padding(device, rng, groups):
    """inf and NaN weights multiply the padding's zeros too (NaN, as numpy's
    padded input gives), on the implicit GEMM (groups=1) and the direct form
    (depthwise)."""
    x = rng.uniform(-1, 1, (1, 5, 6, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 3, 16 // groups, 16)).astype(np.float32)
    w[0, 0, 0, 3] = np.inf
    w[2, 1, 0, 5] = np.nan
    w[1, 2, 0, 7] = -np.inf
    with np.errstate(invalid="ignore"):  # inf * 0
        want = _conv_ref(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), (1, 1),
                         groups)
    assert np.isnan(want[0, 0, 0, 3]) and np.isnan(want[0, 4, 5, 5])  # taps on the padding

    def check(got, want):
        infinite = np.isinf(want)
        np.testing.assert_array_equal(got[infinite], want[infinite])
        _close(np.where(infinite, 0, got), np.where(infinite, 0, want), 1e-4)
    check(kiln.ops.conv2d(kiln.tensor(x, device), w, padding=1, groups=groups).numpy(), want)
    y = kiln.ops.conv2d(kiln.tensor(x.transpose(0, 3, 1, 2), device), w.transpose(3, 2, 0, 1),
                        layout="NCHW", padding=1, groups=groups)
    check(y.numpy(), want.transpose(0, 3, 1, 2))


def test_conv2d_float16(device, rng):
    """f16 in and out, summed in f32: compared with the float64 convolution of the
    same f16 values."""
    require_feature(device, "shader-f16")
    x = rng.uniform(-1, 1, (2, 8, 8, 16)).astype(np.float16)
    w = rng.uniform(-1, 1, (3, 3, 16, 64)).astype(np.float16)
    y = kiln.ops.conv2d(kiln.tensor(x, device), kiln.tensor(w, device), padding=1)
    assert y.dtype == np.float16
    want = _conv_ref(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), (1, 1), 1)
    _close(y.numpy(), want, 2e-3)


def test_conv2d_and_pooling_of_no_images(device):
    """A batch of 0 gives an empty result of the right shape, every other
    argument still checked; other empty dimensions are errors."""
    x = kiln.tensor(np.zeros((0, 5, 5, 4), np.float32), device)
    y = kiln.ops.conv2d(x, np.ones((3, 3, 4, 16), np.float32), bias=np.ones(16, np.float32),
                        activation="relu")
    assert y.shape == (0, 3, 3, 16) and y.dtype == np.float32 and y.numpy().shape == (0, 3, 3, 16)
    nchw = kiln.tensor(np.zeros((0, 4, 5, 5), np.float32), device)
    y = kiln.ops.conv2d(nchw, np.ones((16, 4, 3, 3), np.float32), layout="NCHW", stride=2)
    assert y.shape == (0, 16, 2, 2)
    assert kiln.ops.max_pool2d(x, 2).shape == (0, 2, 2, 4)
    assert kiln.ops.avg_pool2d(nchw, 2, layout="NCHW").shape == (0, 4, 2, 2)
    with pytest.raises(kiln.InvalidArgument, match="W needs 4"):
        kiln.ops.conv2d(x, np.ones((3, 3, 3, 16), np.float32))
    with pytest.raises(kiln.InvalidArgument, match="the window spans 7"):
        kiln.ops.conv2d(x, np.ones((7, 7, 4, 16), np.float32))
    with pytest.raises(kiln.InvalidArgument, match=r"\[0, 5, 5, 0\]"):
        kiln.ops.conv2d(kiln.tensor(np.zeros((0, 5, 5, 0), np.float32), device),
                        np.ones((3, 3, 1, 16), np.float32))


def test_conv2d_errors(device):
    x = kiln.tensor(np.zeros((1, 5, 5, 4), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="needs 4"):
        kiln.ops.conv2d(x, np.zeros((3, 3, 3, 8), np.float32))
    with pytest.raises(kiln.InvalidArgument, match="layout"):
        kiln.ops.conv2d(x, np.zeros((3, 3, 4, 8), np.float32), layout="NWHC")
    with pytest.raises(kiln.InvalidArgument, match="stride"):
        kiln.ops.conv2d(x, np.zeros((3, 3, 4, 8), np.float32), stride=(1, 2, 3))
    with pytest.raises(kiln.InvalidArgument, match="window spans"):
        kiln.ops.conv2d(x, np.zeros((7, 7, 4, 8), np.float32))


@pytest.mark.parametrize("op", ["max", "avg"])
def test_pool2d(device, rng, op):
    x = rng.uniform(-1, 1, (2, 7, 6, 3)).astype(np.float32)
    fn = kiln.ops.max_pool2d if op == "max" else kiln.ops.avg_pool2d
    y = fn(kiln.tensor(x, device), kernel=(3, 2), stride=(2, 1), padding=1).numpy()
    oh, ow = y.shape[1], y.shape[2]
    for i in range(oh):
        for j in range(ow):
            win = x[:, max(2 * i - 1, 0):min(2 * i + 2, 7), max(j - 1, 0):min(j + 1, 6), :]
            want = win.max(axis=(1, 2)) if op == "max" else win.mean(axis=(1, 2))
            _close(y[:, i, j, :], want, 1e-5)


def _attention64(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v in float64, over the last two axes."""
    d = q.shape[-1]
    s = np.matmul(q.astype(np.float64), np.swapaxes(k.astype(np.float64), -1, -2))
    s = s * (1 / np.sqrt(d) if scale is None else scale) + (0 if mask is None else mask)
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))


def _packed_attention64(qkv, heads, **kw):
    """packed_attention's result from _attention64 of the heads split apart."""
    *lead, s, w = qkv.shape
    parts = np.moveaxis(qkv.reshape(*lead, s, 3, heads, w // (3 * heads)), -3, 0)
    o = _attention64(*np.swapaxes(parts, -3, -2), **kw)  # [..., heads, S, D]
    return np.swapaxes(o, -3, -2).reshape(*lead, s, w // 3)


@pytest.mark.parametrize("causal", [False, True])
def test_attention(device, rng, causal):
    q = rng.uniform(-2, 2, (2, 3, 70, 16)).astype(np.float32)
    k = rng.uniform(-2, 2, (2, 3, 45, 16)).astype(np.float32)
    v = rng.uniform(-1, 1, (2, 3, 45, 16)).astype(np.float32)
    mask = rng.uniform(-3, 3, (70, 45)).astype(np.float32)
    mask[:, 1::4] = -np.inf  # hidden keys, as a padding mask has
    want = _attention64(q, k, v, mask=mask, causal=causal)
    y = kiln.ops.attention(kiln.tensor(q, device), k, v, causal=causal, mask=mask)
    _close(y.numpy(), want, 1e-4)
    # A query that sees no key: NaN, as the softmax of no scores.
    mask[5, :] = -np.inf
    y = kiln.ops.attention(kiln.tensor(q, device), k, v, causal=causal, mask=mask).numpy()
    assert np.isnan(y[:, :, 5, :]).all() and not np.isnan(np.delete(y, 5, axis=2)).any()
    with pytest.raises(kiln.InvalidArgument, match="multiple of 4"):
        kiln.ops.attention(kiln.tensor(q[..., :6].copy(), device), k[..., :6].copy(),
                           v[..., :6].copy())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape,heads", [((2, 70, 144), 3), ((33, 48), 1), ((3, 2, 17, 72), 3),
                                         ((2, 1, 3, 9, 24), 2)], ids=str)
def test_packed_attention(device, rng, causal, shape, heads):
    qkv = rng.uniform(-2, 2, shape).astype(np.float32)
    s = shape[-2]
    mask = rng.uniform(-3, 3, (s, s)).astype(np.float32)
    mask[:, 1::4] = -np.inf  # hidden keys, as a padding mask has
    y = kiln.ops.packed_attention(kiln.tensor(qkv, device), heads, causal=causal, mask=mask)
    assert y.shape == shape[:-1] + (shape[-1] // 3,)
    _close(y.numpy(), _packed_attention64(qkv, heads, mask=mask, causal=causal), 1e-4)
    # The same as attention over the heads split apart with kiln's own
    # movement operators, and merged back.
    t = kiln.tensor(qkv, device)
    lead, d = shape[:-2], shape[-1] // (3 * heads)
    n = len(lead)
    parts = kiln.ops.permute(kiln.ops.reshape(t, lead + (s, 3, heads, d)),
                             (n + 1,) + tuple(range(n)) + (n + 2, n, n + 3))
    q, k, v = (kiln.ops.slice(parts, [i], [i + 1]) for i in range(3))
    q, k, v = (kiln.ops.reshape(x, x.shape[1:]) for x in (q, k, v))
    o = kiln.ops.attention(q, k, v, causal=causal, scale=0.25)
    o = kiln.ops.reshape(kiln.ops.permute(o, tuple(range(n)) + (n + 1, n, n + 2)),
                         lead + (s, heads * d))
    _close(kiln.ops.packed_attention(t, heads, causal=causal, scale=0.25).numpy(), o.numpy(),
           1e-5)


def test_packed_attention_f16(device, rng):
    require_feature(device, "shader-f16")
    qkv = rng.uniform(-2, 2, (2, 21, 3 * 2 * 8)).astype(np.float16)
    y = kiln.ops.packed_attention(kiln.tensor(qkv, device), 2, causal=True)
    assert y.dtype == np.float16
    _close(y.numpy().astype(np.float64), _packed_attention64(qkv, 2, causal=True), 5e-3)


def test_packed_attention_errors(device):
    qkv = kiln.tensor(np.zeros((2, 5, 48), np.float32), device)
    bad = kiln.InvalidArgument
    with pytest.raises(bad, match=r"last dimension must be 3 \* heads \* D for heads = 5"):
        kiln.ops.packed_attention(qkv, 5)
    for heads in (0, -3):
        with pytest.raises(bad, match=f"heads = {heads} \\(heads must be at least 1\\)"):
            kiln.ops.packed_attention(qkv, heads)
    with pytest.raises(bad, match="for heads = 99"):
        kiln.ops.packed_attention(qkv, 99)
    with pytest.raises(bad, match="^packed_attention: the head dimension D = 2 must be a multiple"):
        kiln.ops.packed_attention(np.zeros((5, 12), np.float32), 2)
    with pytest.raises(bad, match="head dimension D = 132 must be a multiple of 4 up to 128"):
        kiln.ops.packed_attention(np.zeros((5, 396), np.float32), 1)
    with pytest.raises(bad, match=r"^packed_attention: mask of packed_attention is f32\[5, 4\]; "
                                  r"it must be f32\[Sq, Sk\] = \[5, 5\]"):
        kiln.ops.packed_attention(qkv, 2, mask=np.zeros((5, 4), np.float32))
    with pytest.raises(bad, match=r"packed_attention: qkv has shape \(48,\)"):
        kiln.ops.packed_attention(np.zeros(48, np.float32), 2)
    with pytest.raises(bad, match=r"qkv of shape \(1, 1, 2, 5, 45\), its batch axes seen as one"):
        kiln.ops.packed_attention(np.zeros((1, 1, 2, 5, 45), np.float32), 3)
    with pytest.raises(kiln.ArgumentTypeError, match="packed_attention: heads must be an int"):
        kiln.ops.packed_attention(qkv, 2.0)
    with pytest.raises(kiln.ArgumentTypeError, match="packed_attention: heads must be an int"):
        kiln.ops.packed_attention(qkv, True)
    with pytest.raises(kiln.ArgumentTypeError, match="packed_attention: causal must be a bool"):
        kiln.ops.packed_attention(qkv, 2, causal=1)
    with pytest.raises(kiln.ArgumentTypeError, match="packed_attention: scale must be a number"):
        kiln.ops.packed_attention(qkv, 2, scale="0.5")
    with pytest.raises(bad, match="^packed_attention: the scale must be finite"):
        kiln.ops.packed_attention(qkv, 2, scale=1e39)
    with pytest.raises(bad, match=r"dimension 1 is 0"):
        kiln.ops.packed_attention(np.zeros((2, 0, 48), np.float32), 2)


@pytest.mark.parametrize("sk", [5, 33, 64])
def test_attention_infinite_values(device, sk):
    """An infinite value of V reaches the output where its key is seen (keys
    padding the last block add nothing, not 0 * inf = NaN), as float64's
    softmax gives."""
    q = np.ones((3, 4), np.float32)
    k = np.zeros((sk, 4), np.float32)  # every key equally likely
    v = np.zeros((sk, 4), np.float32)
    v[sk - 1, 0] = np.inf
    v[0, 1] = -np.inf
    y = kiln.ops.attention(kiln.tensor(q, device), k, v).numpy()
    want = np.tile(np.array([np.inf, -np.inf, 0, 0], np.float32), (3, 1))
    np.testing.assert_array_equal(y, want)


def test_attention_follows_the_masks_device(device):
    """numpy q, k and v go to the device of a mask given as a tensor."""
    q = np.ones((7, 8), np.float32)
    kv = np.zeros((3, 8), np.float32)
    mask = np.zeros((7, 3), np.float32)
    mask[:, 0] = -np.inf
    y = kiln.ops.attention(q, kv, kv + 1.0, mask=kiln.tensor(mask, device))
    assert y.device == device
    np.testing.assert_allclose(y.numpy(), np.ones((7, 8), np.float32))


def test_empty_tensors_follow_numpy(device, rng):
    """A dimension of 0: the result numpy gives, with no kernel run."""
    ops = kiln.ops
    z = np.zeros((0, 5), np.float32)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    zt, xt = kiln.tensor(z, device), kiln.tensor(x, device)

    def same(got, want):
        want = np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)

    same(ops.exp(zt), np.exp(z))
    same(ops.add(zt, kiln.tensor(np.zeros((1, 5), np.float32), device)), z + 0)
    same(ops.elementwise_chain(zt, ["relu", ("mul", 2.0)]), z)
    for name, fn in [("sum", np.sum), ("prod", np.prod), ("mean", np.mean)]:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = fn(z, axis=0).astype(np.float32)
        got = getattr(ops, name)(zt, axis=0)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)  # 0, 1, and NaN for the mean
    same(ops.sum(zt, axis=1, keepdims=True), np.zeros((0, 1), np.float32))
    with pytest.raises(kiln.InvalidArgument,
                       match=r"reduce max: inputs of shapes \(0, 5\): zero-size array"):
        ops.amax(zt, axis=0)
    with pytest.raises(kiln.InvalidArgument,
                       match=r"argmax: inputs of shapes \(0, 5\): attempt to get argmax"):
        ops.argmax(zt, axis=0)
    same(ops.argmin(zt, axis=1), np.zeros((0,), np.int32))
    same(ops.softmax(zt), z)
    same(ops.layer_norm(zt, np.ones(5, np.float32), np.zeros(5, np.float32)), z)
    # matmul: M = 0, and K = 0 (zeros, then the epilogue on the device).
    same(ops.matmul(zt, kiln.tensor(np.ones((5, 3), np.float32), device)),
         np.zeros((0, 3), np.float32))
    bias = rng.standard_normal(4).astype(np.float32)
    res = rng.standard_normal((3, 4)).astype(np.float32)
    got = ops.matmul(np.zeros((3, 0), np.float32), kiln.tensor(np.zeros((0, 4), np.float32),
                                                                device),
                     bias=bias, activation="relu", residual=res)
    np.testing.assert_allclose(got.numpy(), np.maximum(bias, 0) + res, rtol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match="matmul"):
        ops.matmul(zt, kiln.tensor(np.ones((4, 3), np.float32), device))
    # Data movement.
    same(ops.transpose(zt), z.T)
    same(ops.reshape(zt, (5, 0)), z.reshape(5, 0))
    same(ops.concat([zt, xt], 0), np.concatenate([z, x]))
    same(ops.concat([zt, zt], 0), z)
    same(xt[1:1], x[1:1])
    same(ops.slice(xt, [0, 3], [2, 1]), x[0:2, 3:1])
    same(ops.pad(zt, [1, 0], [0, 1], value=7), np.pad(z, [(1, 0), (0, 1)], constant_values=7))
    same(ops.gather(xt, np.zeros((0, 2), np.int32)), x[np.zeros((0, 2), np.intp)])
    same(ops.cast(zt, "int32"), z.astype(np.int32))
    same(ops.where(zt, zt, 1.0), z)
    with pytest.raises(kiln.InvalidArgument,
                       match=r"add: inputs of shapes \(0, 5\), \(2, 5\): shape mismatch"):
        ops.add(zt, xt)
    with pytest.raises(kiln.InvalidArgument, match="concat: shapes"):
        ops.concat([zt, kiln.tensor(np.zeros((0, 4), np.float32), device)], 0)
    # A reduction of everything is 0-d, as numpy's.
    same(ops.sum(zt), np.float32(0))
    same(ops.prod(kiln.tensor(np.zeros((3, 0), np.int32), device)), np.int32(1))


def test_empty_tensors_check_every_argument(device):
    # What the call with elements refuses, the empty call refuses too.
    def z(*shape, dtype=np.float32):
        return kiln.tensor(np.zeros(shape, dtype), device)
    ops = kiln.ops
    refused = [
        (lambda: ops.matmul(z(2, 0), z(0, 3), residual=np.ones((5, 2, 3), np.float32)),
         "residual of matmul has shape"),
        (lambda: ops.matmul(z(2, 0), z(0, 3), bias=np.ones(7, np.float32)), "bias of matmul"),
        (lambda: ops.matmul(z(2, 0), z(0, 3, dtype=np.int32)), "matmul"),
        (lambda: ops.matmul(z(2, 0), z(0, 3), accumulate="float16"), "f16 accumulation"),
        (lambda: ops.matmul(z(2, 1, 2, 1, 2, 0), z(1, 2, 1, 2, 0, 3)),
         "more than 2 batch axes remain"),
        (lambda: ops.add(z(0, 3), z(0, 3, dtype=np.int32)), "add: dtype mismatch"),
        (lambda: ops.elementwise_chain(z(0, 3), ["foo"]), "unknown elementwise op 'foo'"),
        (lambda: ops.softmax(z(0, 3, dtype=np.int32)), "input X of softmax has dtype i32"),
        (lambda: ops.pad(z(0, 3, dtype=np.int32), 1, 1, value=0.5), "value 0.5 is not an i32"),
        (lambda: ops.gather(np.ones((3, 4), np.float32), z(0)), "Indices of gather"),
        (lambda: ops.pad(z(0, 3), -1, 0), "axis 0 is padded by -1 and 0"),
        (lambda: ops.permute(z(0, 3), (0, 0)), "perm entry 1 is 0"),
        # Shapes that do not fit are quoted as given (not with 0 taken as 1).
        (lambda: ops.matmul(z(0, 3), z(4, 2)), r"matmul: inputs of shapes \(0, 3\), \(4, 2\): "),
        (lambda: ops.matmul(z(0, 5, 3), z(2, 3, 4)), r"inputs of shapes \(0, 5, 3\), \(2, 3, 4\)"),
    ]
    for call, message in refused:
        with pytest.raises(kiln.InvalidArgument, match=message):
            call()
    # And what it accepts still gives numpy's result without a kernel run.
    got = ops.matmul(z(3, 0), z(0, 4), bias=np.ones(4, np.float32), activation="relu")
    np.testing.assert_array_equal(got.numpy(), np.ones((3, 4), np.float32))


def test_bool_tensors_cast_and_move(device):
    x = np.array([[-1.5, 0, 2.5], [np.nan, -0.0, 3]], np.float32)
    t = kiln.tensor(x, device)
    m, mn = t > 0, x > 0

    def same(got, want):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)

    same(m.astype(np.float32), mn.astype(np.float32))
    same(m.astype("int32"), mn.astype(np.int32))
    same(t.astype(bool), x.astype(bool))  # NaN is true, -0.0 false
    same(m[0], mn[0])
    same(m[:, ::-1], mn[:, ::-1])
    same(m.reshape(6), mn.reshape(6))
    same(m.T, mn.T)
    same(kiln.ops.concat([m, m]), np.concatenate([mn, mn]))
    same(kiln.ops.pad(m, 1, 1, value=True), np.pad(mn, 1, constant_values=True))
    same(kiln.ops.where(m, m, ~m), np.where(mn, mn, ~mn))
    same(kiln.ops.gather(m, [1, 0]), mn[[1, 0]])


def test_uint32_arithmetic_as_numpy(device, rng):
    # uint32 arithmetic wraps as numpy's does; comparisons are unsigned.
    a = rng.integers(0, 2**32, (5, 1, 33), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(1, 2**32, (4, 33), dtype=np.uint64).astype(np.uint32)
    a.reshape(-1)[:6] = [0, 1, 2**31, 2**32 - 1, 2**31 - 1, 7]
    b.reshape(-1)[:6] = [2**32 - 1, 1, 2**31, 3, 2**32 - 1, 7]
    small = rng.integers(0, 32, (4, 33), dtype=np.uint32)
    ta, tb, ts = (kiln.tensor(v, device) for v in (a, b, small))

    def same(got, want):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (got, want.dtype, want.shape)
        np.testing.assert_array_equal(got.numpy(), want)

    for fn in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
               operator.and_, operator.or_, operator.xor, kiln.ops.max, kiln.ops.min):
        host = {kiln.ops.max: np.maximum, kiln.ops.min: np.minimum}.get(fn, fn)
        same(fn(ta, tb), host(a, b))
        same(fn(tb, 3), host(b, np.uint32(3)))
        same(fn(2**32 - 1, tb), host(np.uint32(2**32 - 1), b))
    for fn in (operator.lshift, operator.rshift, operator.pow):
        same(fn(ta, ts), fn(a, small))
    for fn in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
        same(fn(ta, tb), fn(a, b))
        same(fn(ta, 2**31), fn(a, np.uint32(2**31)))
    for fn, host in ((operator.neg, np.negative), (abs, np.abs), (operator.invert, np.invert),
                     (kiln.ops.sign, np.sign), (kiln.ops.square, np.square),
                     (kiln.ops.relu, lambda v: np.maximum(v, np.uint32(0))),
                     (kiln.ops.popcount, lambda v: np.bitwise_count(v).astype(np.uint32))):
        same(fn(ta), host(a))
    # Reductions in uint32: sums and products wrap (numpy's are uint64).
    same(ta.sum(axis=2), a.sum(axis=2).astype(np.uint32))
    same(kiln.ops.prod(ta, axis=0), a.prod(axis=0, dtype=np.uint32))
    same(ta.max(axis=(0, 2)), a.max(axis=(0, 2)))
    same(ta.min(), a.min())
    same(ta.argmax(axis=2), a.argmax(axis=2).astype(np.int32))
    same(kiln.ops.argmin(ta, axis=0), a.argmin(axis=0).astype(np.int32))
    # True division and float numbers compute in float32, as for int32.
    np.testing.assert_allclose((ta / tb).numpy(), (a / b).astype(np.float32), rtol=1e-6)
    assert (ta * 1.5).dtype == np.float32 and ta.clip(0.5, 9).dtype == np.float32
    same(ta.clip(5, 2**31), np.clip(a, 5, 2**31))
    same(kiln.ops.where(ta > tb, ta, 9), np.where(a > b, a, np.uint32(9)))
    # A bool beside a uint32 runs as uint32 (numpy's result dtype).
    mask = a % 2 == 0
    same(ta & kiln.tensor(mask, device), a & mask)
    same(kiln.tensor(mask, device) + tb, mask + b)
    # Fused as unfused, constants of the dtype; bools beside uint32 values
    # run as uint32 there and in chains too.
    same(kiln.fuse(lambda x, y: (x + y) * (2**32 - 1) >> 3)(ta, tb), (a + b) * np.uint32(2**32 - 1)
         >> np.uint32(3))
    same(kiln.fuse(lambda x: x * (x > 2**31))(ta), a * (a > 2**31))
    same(kiln.fuse(lambda x, m: kiln.ops.where(m, x, m))(ta, kiln.tensor(mask, device)),
         np.where(mask, a, mask))
    same(kiln.ops.elementwise_chain(tb, [("add", kiln.tensor(mask[0, 0], device))]),
         b + mask[0, 0])
    # numpy scalars of other integer dtypes, and uint32 indices (those past
    # the table clamped, as every out-of-range index).
    same(ta + np.uint8(3), a + np.uint8(3))
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([0, 3, 2**31, 2**32 - 1], np.uint32)
    same(kiln.ops.gather(table, kiln.tensor(idx, device)), table[[0, 3, 3, 3]])
    # Rank 5 through merged views.
    a5 = a.reshape(5, 1, 3, 11, 1)
    same(-kiln.tensor(a5, device) + 1, -a5 + np.uint32(1))
    # kiln's integer rules where numpy differs: x // 0 is x, shift amounts
    # are taken modulo 32.
    z = kiln.tensor(np.zeros(33, np.uint32), device)
    same(ta // z, a)
    same(ta % z, np.zeros_like(a))
    same(ta << 33, a << np.uint32(1))
    # Numbers out of uint32's range are refused, naming them.
    for call, message in ((lambda: ta + -1, "add: the number -1 is not a uint32 value"),
                          (lambda: ta >= 2**32, "ge: the number 4294967296 is not a uint32"),
                          (lambda: ta ** -1, "pow: the number -1 is not a uint32"),
                          (lambda: kiln.ops.elementwise_chain(ta, [("mul", 2**32)]),
                           "the constant 4294967296 is not a u32"),
                          (lambda: kiln.fuse(lambda x: x + -1)(ta),
                           r"the number -1 is not a uint32 value"),
                          (lambda: ta.mean(), "mean: input X of reduce mean is u32"),
                          (lambda: kiln.ops.exp(ta), "exp takes f32 or f16")):
        with pytest.raises(kiln.InvalidArgument, match=message):
            call()


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_byte_arithmetic_as_numpy(device, rng, dtype):
    # int8 and uint8 arithmetic wraps as numpy's does (computed on the values
    # in int32, the low 8 bits kept); comparisons give bools; numpy's result
    # dtypes beside other dtypes.
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (3, 1, 7), dtype=dtype)
    b = rng.integers(info.min, info.max + 1, (5, 7), dtype=dtype)
    a.reshape(-1)[:3] = [info.min, info.max, 0]
    b[b == 0] = 1
    b.reshape(-1)[0] = info.max if dtype == np.uint8 else -1
    small = rng.integers(0, 8, (5, 7)).astype(dtype)
    ta, tb, ts = (kiln.tensor(v, device) for v in (a, b, small))

    def same(got, want):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (got, want.dtype, want.shape)
        np.testing.assert_array_equal(got.numpy(), want)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (numpy's overflow warnings for MIN // -1)
        for fn in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
                   operator.and_, operator.or_, operator.xor, operator.lt, operator.eq,
                   operator.ge):
            same(fn(ta, tb), fn(a, b))
            same(fn(ta, 3), fn(a, dtype(3)))
            same(fn(5, tb), fn(dtype(5), b))
        for fn in (operator.lshift, operator.rshift, operator.pow):
            same(fn(ta, ts), fn(a, small))
        for fn, host in ((operator.neg, np.negative), (abs, np.abs), (operator.invert, np.invert),
                         (kiln.ops.sign, np.sign), (kiln.ops.square, np.square)):
            same(fn(ta), host(a))
    same(kiln.ops.max(ta, tb), np.maximum(a, b))
    same(ta.clip(3, 50), np.clip(a, dtype(3), dtype(50)))
    # popcount counts the byte's own bits.
    same(kiln.ops.popcount(ta), np.bitwise_count(a.view(np.uint8)).astype(dtype))
    np.testing.assert_allclose((ta / tb).numpy(), (a / b).astype(np.float32), rtol=1e-6)
    same(ta * 1.5, a.astype(np.float32) * np.float32(1.5))
    # Reductions: sums and products in int32 (numpy's are int64), max and
    # min in the dtype, arg-reductions int32 indices.
    same(ta.sum(axis=2), a.sum(axis=2).astype(np.int32))
    same(kiln.ops.prod(tb, axis=0), b.prod(axis=0, dtype=np.int32))
    same(ta.max(axis=(0, 2)), a.max(axis=(0, 2)))
    same(tb.min(), b.min())
    same(ta.argmax(axis=2), a.argmax(axis=2).astype(np.int32))
    # numpy's result dtype beside int32, uint32 (uint8), floats and bools.
    same(ta + kiln.tensor(b.astype(np.int32), device), a + b.astype(np.int32))
    same(ta + kiln.tensor(b.astype(np.float32), device), a + b.astype(np.float32))
    same(ta < kiln.tensor(b.astype(np.int32), device), a < b.astype(np.int32))
    same(ta + kiln.tensor(b > 0, device), a + (b > 0))
    same(kiln.tensor(b.astype(np.float32), device) + np.int8(1), b.astype(np.float32) + 1)
    same(ta.sum(dtype=dtype), a.sum(dtype=dtype))
    same(tb.prod(axis=0, dtype=dtype), b.prod(axis=0, dtype=dtype))
    same(kiln.ops.logical_and(ta, tb), np.logical_and(a, b))
    same(kiln.ops.logical_or(ta, kiln.tensor(b > 0, device)), np.logical_or(a, b > 0))
    np.testing.assert_array_equal(ta.clip(0.5, 3.5).numpy(),
                                  np.clip(a.astype(np.float32), 0.5, 3.5))
    if dtype == np.uint8:
        same(ta * kiln.tensor(b.astype(np.uint32), device), a * b.astype(np.uint32))
    # Any rank, empty tensors.
    a5 = a.reshape(3, 1, 7, 1, 1)
    same(-kiln.tensor(a5, device), -a5)
    same(kiln.tensor(np.zeros((0, 3), dtype), device) + 1, np.zeros((0, 3), dtype))
    other = np.uint8 if dtype == np.int8 else np.int8
    for call, message in ((lambda: ta + 300, "add: 300 is not a.* value .an integer in"),
                          (lambda: ta < 0.5, "lt: 0.5 is not a"),
                          (lambda: ta + kiln.tensor(b.astype(other), device),
                           "add: dtype mismatch: A is .*, B is .* .numpy's result dtype"),
                          (lambda: kiln.ops.exp(ta), "exp: an input is .*int8, but exp takes"),
                          (lambda: kiln.fuse(lambda x: x + 1)(ta),
                           "argument 0 is .*int8; fused kernels take .*cast int8 and uint8"),
                          (lambda: kiln.ops.elementwise_chain(ta, [("add", 1)]),
                           "elementwise_chain: x is .*int8; chains run on .*cast int8"),
                          (lambda: ta.mean(), "mean: input X of reduce mean is .*int8")):
        with pytest.raises(kiln.InvalidArgument, match=message):
            call()


def test_uint32_tensors_move_and_cast(device, rng):
    # uint32 tensors move as 32-bit words (every bit kept) and cast to and
    # from the other dtypes by the IR's rules.
    a = rng.integers(0, 2**32, (5, 7, 3), dtype=np.uint64).astype(np.uint32)
    a.reshape(-1)[:4] = [0xFFFFFFFF, 2**31, 0, 1]
    t = kiln.tensor(a, device)
    m = a % 3 == 0

    def same(got, want):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)

    same(t.T, a.T)
    same(kiln.ops.permute(t, (1, 0, 2)), a.transpose(1, 0, 2))
    same(t.reshape(7, 15), a.reshape(7, 15))
    same(t[1:4, ::-2, 1], a[1:4, ::-2, 1])
    same(t[2], a[2])
    same(kiln.ops.concat([t, t[:, :2]], axis=1), np.concatenate([a, a[:, :2]], 1))
    same(kiln.ops.pad(t, 1, 2, value=2**32 - 1), np.pad(a, [(1, 2)] * 3, constant_values=2**32 - 1))
    same(kiln.ops.where(kiln.tensor(m, device), t, 7), np.where(m, a, np.uint32(7)))
    same(kiln.ops.where(t, 2**32 - 2, t), np.where(a != 0, np.uint32(2**32 - 2), a))
    same(kiln.ops.gather(t.reshape(15, 7), [14, 0, 3]), a.reshape(15, 7)[[14, 0, 3]])
    same(kiln.ops.pad(kiln.tensor(np.zeros((0, 2), np.uint32), device), 1, 0, value=5),
         np.pad(np.zeros((0, 2), np.uint32), [(1, 0), (1, 0)], constant_values=5))
    same(t.astype(np.int32), a.view(np.int32))
    same(kiln.fuse(lambda v: v.astype("uint32"))(a.view(np.int32)), a)
    same(t.astype(bool), a.astype(bool))
    same(kiln.tensor(a.view(np.int32), device).astype(np.uint32), a)
    same(kiln.tensor(m, device).astype("uint32"), m.astype(np.uint32))
    # u32 to f32 rounds to one of the two nearest floats; below 2^24 exactly.
    small = a >> 8
    same(kiln.tensor(small, device).astype(np.float32), small.astype(np.float32))
    f = np.array([np.nan, np.inf, -np.inf, -2.7, 2.7, -0.0, 3e9, 5e9, 4294967040.0, 0.5],
                 np.float32)
    same(kiln.tensor(f, device).astype(np.uint32),
         np.array([0, 4294967040, 0, 0, 2, 0, 3000000000, 4294967040, 4294967040, 0],
                  np.uint32))
    for bad, message in ((lambda: kiln.ops.pad(t, 1, 1, value=-1), "pad: value: -1 is not a uint32"),
                         (lambda: kiln.ops.where(m, t, 2**32), "where: 4294967296 is not a uint32"),
                         (lambda: kiln.ops.where(m, t, 1.5), "where: 1.5 is not a uint32"),
                         (lambda: t + -1, "add: the number -1 is not a uint32 value"),
                         (lambda: kiln.fuse(lambda v: v.astype("int8"))(a.view(np.int32)),
                          "not one a fused kernel computes in .*cast the fused result")):
        with pytest.raises(kiln.InvalidArgument, match=message):
            bad()


def test_where_takes_number_pairs_and_conditions_of_any_dtype(device, rng):
    # numpy's where: a and b may both be numbers, the condition any dtype
    # (non-zero; NaN is true); fused and unfused alike.
    x = rng.standard_normal((7, 33)).astype(np.float32)
    x[0, :3] = [np.nan, -0.0, 0.0]
    t = kiln.tensor(x, device)
    i = (np.nan_to_num(x) * 4).astype(np.int32)
    ints = kiln.tensor(i, device)
    cases = [(lambda c: kiln.ops.where(c > 0, 1, 2.5), np.where(x > 0, 1, 2.5).astype(np.float32)),
             (lambda c: kiln.ops.where(c > 0, 1, 2), np.where(x > 0, 1, 2).astype(np.int32)),
             (lambda c: kiln.ops.where(c > 0, True, False), x > 0),
             (lambda c: kiln.ops.where(c, 3, -4), np.where(x != 0, 3, -4).astype(np.int32)),
             (lambda c: kiln.ops.where(0.5, c, -c), x),
             (lambda c: kiln.ops.where(np.nan, c, -c), x)]
    for f, want in cases:
        for got in (f(t), kiln.fuse(f)(t)):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want)
    want = np.where(x, i, 7)
    for got in (kiln.ops.where(t, ints, 7), kiln.fuse(lambda c, i: kiln.ops.where(c, i, 7))(t, ints)):
        np.testing.assert_array_equal(got.numpy(), want)


def test_where_takes_numbers_exactly_for_int32(device):
    a = np.arange(-3, 3, dtype=np.int32)
    t = kiln.tensor(a, device)
    np.testing.assert_array_equal(kiln.ops.where(t > 0, t, 7).numpy(), np.where(a > 0, a, 7))
    for bad in (0.5, 2**31, float("nan")):
        with pytest.raises(kiln.InvalidArgument, match="is not an int32 value"):
            kiln.ops.where(t > 0, t, bad)


def test_constants_key_kernels_exactly(device):
    # 0.0 and -0.0 are different constants (== says they are equal), and a
    # NaN constant is one kernel however often it is used (== says no NaN
    # equals itself): whichever is built first must not decide the other.
    t = kiln.tensor(np.array([1.0, 2.0], np.float32), device)
    kiln.ops.pad(t, 1, 0, value=0.0).numpy()
    assert np.signbit(kiln.ops.pad(t, 1, 0, value=-0.0).numpy()[0])
    f1 = kiln.fuse(lambda a: kiln.ops.where(a > 5, a, 0.0))
    f2 = kiln.fuse(lambda a: kiln.ops.where(a > 5, a, -0.0))
    assert not np.signbit(f1(t).numpy()).any()
    assert np.signbit(f2(t).numpy()).all()
    # (Not ("where", -0.0, 1.0): lavapipe's shader compiler turns a select
    # of constants 0 and 1 into a conversion, which drops the zero's sign.)
    chain = kiln.ops.elementwise_chain
    assert not np.signbit(chain(t, [("lt", 5), ("where", 0.0, 1.5)]).numpy()).any()
    assert np.signbit(chain(t, [("lt", 5), ("where", -0.0, 1.5)]).numpy()).all()
    cache = len(device._cache)
    for _ in range(5):
        kiln.ops.pad(t, 1, 0, value=float("nan")).numpy()
        kiln.ops.elementwise_chain(t, [("lt", 5), ("where", float("nan"), 1.0)]).numpy()
    assert len(device._cache) == cache + 2


def test_zero_dimensional_operands(device):
    # 0-d tensors (a full reduction, x[i, j]) and 0-d arrays work in every
    # elementwise operator, their results shaped as numpy's.
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = kiln.tensor(a, device)

    def same(got, want):
        want = np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)

    same(t - t.mean(), a - a.mean())
    same(t[1, 2] + 1, a[1, 2] + 1)
    same(kiln.ops.exp(t.sum()), np.exp(a.sum()))
    same(t.sum() * t.sum(), a.sum() ** 2)
    same(t.sum() > 3, a.sum() > 3)
    same(t + np.array(2.0, np.float32), a + np.float32(2))
    same(kiln.ops.where(t > 2, t, t.mean()), np.where(a > 2, a, a.mean()))
    same(kiln.ops.where(t.sum() > 2, t.sum(), 0.0), np.where(a.sum() > 2, a.sum(), np.float32(0)))
    same(kiln.ops.elementwise_chain(t.sum(), [("mul", 2.0), "relu"]), np.float32(a.sum() * 2))
    same(kiln.ops.elementwise_chain(t, [("sub", t.mean())]), a - a.mean())
    same(kiln.fuse(lambda x, m: (x - m) * 2)(t, t.mean()), (a - a.mean()) * 2)
    same(kiln.fuse(lambda x, y: x * y)(t.sum(), t.mean()), a.sum() * a.mean())
    assert float(t.sum()) == 15.0 and int(t[1, 1]) == 4
    with pytest.raises(TypeError, match="one element"):
        float(t)
    # numpy's protocols of 0-d arrays: an int32 one indexes, any one formats.
    assert [10, 20, 30, 40][kiln.ops.argmax(t[1])] == 30
    assert f"{t.sum():.2f}" == "15.00" and f"{kiln.ops.argmax(t[1]):03d}" == "002"
    assert format(t, "") == str(t)
    with pytest.raises(TypeError, match="only a 0-d integer tensor converts to an index; this "
                                        "one is float32\\[\\]"):
        [1, 2][t.sum()]
    # ... and so kiln's own int arguments take it, and 0-d integer arrays, as numpy's do.
    i2, n1 = kiln.ops.argmax(t[0]), np.array(1, dtype=np.uint8)
    assert int(i2) == 2 and [10, 20, 30][kiln.tensor(np.uint32(1))] == 20
    same(kiln.ops.sum(t, axis=n1), a.sum(axis=1))
    same(kiln.ops.softmax(t, axis=i2 - 1), kiln.ops.softmax(t, axis=1).numpy())
    same(t.reshape((3, i2)), a.reshape(3, 2))
    same(t[i2 - 1:, ::i2], a[1:, ::2])
    same(kiln.ops.slice(t, [n1 - 1, n1], [i2, None], [1, i2 - 1]), a[:2, 1:])
    same(kiln.ops.permute(t, (i2 - 1, n1 - 1)), a.T)
    same(kiln.ops.concat([t, t], axis=n1), np.concatenate([a, a], axis=1))
    same(kiln.ops.pad(t, i2 - 1, (n1, i2)), np.pad(a, ((1, 1), (1, 2))))
    assert kiln.empty(i2, device=device).shape == (2,)
    assert kiln.empty((n1, i2), device=device).shape == (1, 2)
    for bad in (t.sum(), np.array(1.0), np.array(True), t[0, 0] > 1):
        with pytest.raises(kiln.ops.ArgumentTypeError, match="reduce sum: axis must be an int"):
            kiln.ops.sum(t, axis=bad)
    with pytest.raises(TypeError, match="indices are ints, slices and '...'; got Tensor of "
                                        "dtype float32"):
        t[t.sum()]
    with pytest.raises(kiln.InvalidArgument, match="input X of reduce mean is bool; mean takes "
                                                   "f32 or f16"):
        (t > 1).mean()

    class Index:  # anything with __index__ and no axes, as numpy takes it
        ndim, dtype = 0, "other.int64"

        def __index__(self):
            return 1

    same(t[Index()], a[1])
    same(kiln.ops.sum(t, axis=Index()), a.sum(axis=1))
    with pytest.raises(TypeError, match="got timedelta64 of dtype timedelta64"):
        t[np.timedelta64(1)]
    with pytest.raises(kiln.ops.ArgumentTypeError, match="axis must be an int; got timedelta64"):
        kiln.ops.sum(t, axis=np.timedelta64(1))
    with pytest.raises(TypeError, match="this one is int32\\[1\\]"):
        operator.index(kiln.ops.argmax(t, axis=1, keepdims=True)[:1, 0])
    with pytest.raises(TypeError, match="format spec '.2f' given for a tensor of shape"):
        f"{t:.2f}"
    with pytest.raises(TypeError, match="pow\\(\\) with a modulus is not supported"):
        pow(t, 2, 5)
    np.testing.assert_array_equal(pow(t, 2).numpy(), a ** 2)
    with pytest.raises(TypeError, match="pow\\(\\) with a modulus is not supported"):
        kiln.fuse(lambda x: pow(x, 2, 5))(t)
    # numpy's indices: a 0-d integer array or int32 tensor indexes a tensor
    # as an int does; a 0-d float one, or a 1-element array, does not.
    np.testing.assert_array_equal(t[0, kiln.ops.argmax(t[1])].numpy(), a[0, 2])
    np.testing.assert_array_equal(t[1, np.array(2)].numpy(), a[1, 2])
    np.testing.assert_array_equal(t[np.int64(-1)].numpy(), a[-1])
    for bad in (t.sum(), np.array(1.0), np.array([1])):
        with pytest.raises(TypeError, match="kiln.Tensor indices are ints, slices and"):
            t[bad]
    np.testing.assert_array_equal((2 ** t).numpy(), 2 ** a)


def test_index_and_shape_edges(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = kiln.tensor(a, device)
    for k in [(slice(None, None, 2**63),), (slice(None, None, -(2**63)),),
              (slice(-2**70, 2**70),), (slice(2**70, -2**70, -1), slice(None, None, 5))]:
        np.testing.assert_array_equal(t[k].numpy(), a[k])
    # A 1-D operand's contraction error quotes the shapes as given.
    for sa, sb, ka, kb in [((2, 3, 4), (3,), 4, 3), ((3,), (4, 5), 3, 4), ((3,), (4,), 3, 4)]:
        with pytest.raises(kiln.InvalidArgument, match=re.escape(
                f"matmul: A is {list(sa)} and B is {list(sb)}: the contraction dimension "
                f"differs ({ka} against {kb})")):
            kiln.ops.matmul(kiln.tensor(np.ones(sa, np.float32), device),
                            kiln.tensor(np.ones(sb, np.float32), device))
    for index in (lambda: t[None], lambda: t[0, 0, None], lambda: kiln.tensor(5.0, device)[None]):
        with pytest.raises(TypeError, match="np.newaxis"):
            index()
    with pytest.raises(kiln.InvalidArgument, match="more elements than any device buffer"):
        kiln.empty((2**62, 4), device=device)
    # axis=() reduces nothing; a 0-d tensor reduces to itself; 0-d reshapes.
    for name in ("sum", "mean", "prod", "amax", "amin"):
        got = getattr(kiln.ops, name)(t, axis=())
        np.testing.assert_array_equal(got.numpy(), getattr(np, name)(a, axis=()))
    # ... a new tensor each time, empty ones too.
    e = kiln.tensor(np.zeros((0, 3), np.float32), device)
    for got in (e.sum(axis=()), kiln.ops.sum(e, axis=()), kiln.ops.amax(e, axis=())):
        assert got is not e and got.shape == (0, 3) and got.dtype == np.float32
    s = t.sum()
    assert s.sum().shape == () and float(s.sum()) == 15.0 and float(s.max()) == 15.0
    assert s.reshape(1, 1).shape == (1, 1) and s.reshape(1).numpy().tolist() == [15.0]
    assert t[0:1, 0:1].reshape(()).shape == ()
    with pytest.raises(kiln.InvalidArgument, match="cannot reshape a tensor of 6 elements"):
        t.reshape(())


def test_where_with_bools_and_numbers(device):
    x = np.array([1.0, -1.0, 2.0], np.float32)
    m = np.array([True, False, True])
    c, mt = kiln.tensor(x, device) > 0, kiln.tensor(m, device)

    def same(got, want):
        want = np.asarray(want)
        assert got.numpy().dtype == (np.int32 if want.dtype.kind == "i" else want.dtype)
        np.testing.assert_array_equal(got.numpy(), want)

    same(kiln.ops.where(c, mt, True), np.where(x > 0, m, True))
    same(kiln.ops.where(c, np.True_, mt), np.where(x > 0, np.True_, m))
    same(kiln.ops.where(c, mt, 2), np.where(x > 0, m, 2))
    same(kiln.ops.where(True, kiln.tensor(x, device), 0.0), np.where(True, x, np.float32(0)))
    same(kiln.ops.pad(mt, 1, 0, np.int64(1)), np.pad(m, (1, 0), constant_values=True))


def test_zero_dimensional_indexing_reshape_and_chains(device):
    t = kiln.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    s = t.sum()
    assert float(s[()]) == 15.0 and s[...].shape == ()
    with pytest.raises(kiln.InvalidArgument, match="cannot reshape a tensor of 1 elements"):
        kiln.ops.reshape(s, [-1, -1])
    # Steps given by a generator, read once, for a 0-d input too.
    assert float(kiln.ops.elementwise_chain(s, (st for st in [("mul", 2.0)]))) == 30.0


def test_program_call_names_an_input_that_is_not_a_tensor(device):
    program = kiln._kiln.ops.elementwise(device, "add", [((4,), "float32")] * 2)
    x = kiln.tensor(np.ones(4, np.float32), device)
    for args, position, kind in [(("x", x), 1, "str"), ((x, None), 2, "NoneType"),
                                 ((x, 3), 2, "int")]:
        with pytest.raises(TypeError, match=f"program input {position} is a {kind}, not a "
                           "kiln.Tensor"):
            program(*args)


def test_misuse_gets_clear_errors(device):
    t = kiln.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    x4 = kiln.tensor(np.ones((1, 4, 4, 2), np.float32), device)
    w = kiln.tensor(np.ones((3, 3, 2, 2), np.float32), device)
    bad = kiln.InvalidArgument
    # Sizes beyond 64 bits name the argument (not the binding's signature).
    with pytest.raises(bad, match="reshape: shape entry 0 is 9223372036854775808"):
        kiln.ops.reshape(t, (2**63, 1))
    with pytest.raises(bad, match="pad: before is 9223372036854775808"):
        kiln.ops.pad(t, 2**63, 0)
    with pytest.raises(bad, match="conv2d: stride is 9223372036854775808"):
        kiln.ops.conv2d(x4, w, stride=2**63)
    with pytest.raises(bad, match="max_pool2d: the window must be at most 2\\^30"):
        kiln.ops.max_pool2d(x4, 2**40)
    with pytest.raises(bad, match="kiln.empty: shape entry 0 is 9223372036854775808"):
        kiln.empty((2**63,), device=device)
    with pytest.raises(TypeError, match="kiln.empty: shape entry 0 must be an int; got 2.7"):
        kiln.empty((2.7, 3), device=device)
    for stride in (0, (0, 1), (2, 0)):
        with pytest.raises(bad, match="max_pool2d: the stride must be at least 1"):
            kiln.ops.max_pool2d(x4, 2, stride=stride)
        with pytest.raises(bad, match="avg_pool2d: the stride must be at least 1"):
            kiln.ops.avg_pool2d(x4, 2, stride=stride)
    for kernel in (0, (0, 2), (2, -1)):  # the stride, by default the window, is not named
        with pytest.raises(bad, match="max_pool2d: the kernel must be at least 1; got"):
            kiln.ops.max_pool2d(x4, kernel)
        with pytest.raises(bad, match="avg_pool2d: the kernel must be at least 1; got"):
            kiln.ops.avg_pool2d(x4, kernel, stride=1)
    q2 = kiln.tensor(np.zeros((2, 4), np.float32), device)
    for scale in (1e39, -1e39, float("inf"), float("nan")):
        with pytest.raises(bad, match="attention: the scale must be finite"):
            kiln.ops.attention(q2, q2, q2, scale=scale)
    # A tensor the device cannot bind is refused before anything runs,
    # naming the operator, the tensor and the limit.
    most = device.limits["max_storage_buffer_binding_size"]
    n = int((most // 4) ** 0.5) + 1
    col = kiln.tensor(np.ones((n, 1), np.float32), device)
    row = kiln.tensor(np.ones((1, n), np.float32), device)
    with pytest.raises(bad, match=rf"add: its output C, float32\[{n}, {n}\], is {n * n * 4} "
                                  rf"bytes, more than the device binds of one buffer "
                                  rf"\(maxStorageBufferBindingSize, {most} bytes\)"):
        col + row
    with pytest.raises(bad, match=rf"sum\(dtype=...\): dtype int64 is not one kiln casts to"):
        t.sum(dtype=np.int64)
    # An unknown reduce op, even where nothing is reduced.
    for axis in ((), None):
        with pytest.raises(bad, match="unknown reduce op 'bogus'"):
            kiln.ops.reduce_axes("bogus", t, axis=axis)
    with pytest.raises(bad, match="attention: q, k and v have shapes \\(1, 1, 1, 8, 4\\), "
                       "\\(2, 8, 4\\) and \\(2, 8, 4\\); above rank 4"):
        q = kiln.tensor(np.ones((2, 8, 4), np.float32), device)
        kiln.ops.attention(kiln.tensor(np.ones((1, 1, 1, 8, 4), np.float32), device), q, q)
    with pytest.raises(bad, match="cast: dtype None is not a dtype"):
        kiln.ops.cast(t, None)
    with pytest.raises(bad, match="steps must be a list of steps; got the string 'relu'"):
        kiln.ops.elementwise_chain(t, "relu")
    with pytest.raises(bad, match="layer_norm: x is 0-d"):
        kiln.ops.layer_norm(t.sum(), np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(bad, match="concat: the tensors have dtypes bool, int32"):
        kiln.ops.concat([kiln.tensor(np.ones(2, bool), device),
                         kiln.tensor(np.ones(2, np.int32), device)])
    with pytest.raises(bad, match="pad: a bool tensor pads with False or True; got 2"):
        kiln.ops.pad(kiln.tensor(np.ones(2, bool), device), 1, 1, 2)
    # Wrong argument types are TypeErrors as well as kiln.InvalidArgument.
    for call in (lambda: kiln.ops.sum(t, axis=1.0), lambda: kiln.ops.softmax(t, axis="0"),
                 lambda: kiln.ops.reshape(t, (6.0,)), lambda: kiln.ops.add(t, None),
                 lambda: kiln.ops.matmul(t, t.T, transpose_a="no")):
        with pytest.raises(TypeError):
            call()
        with pytest.raises(kiln.ArgumentTypeError):
            call()


def test_misused_op_names_steps_dtypes_and_indices(device):
    t = kiln.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    table = kiln.tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device)
    bad = kiln.InvalidArgument
    for call, message in [
            (lambda: kiln.ops.elementwise_chain(t, None),
             "steps must be a list of steps; got None"),
            (lambda: kiln.ops.elementwise_chain(t, 3), "steps must be a list of steps; got 3"),
            (lambda: kiln.ops.elementwise_chain(t, [("add", None)]),
             r"step 1 \(add\): an operand must be a kiln.Tensor, a numpy array or a number; got "
             r"NoneType"),
            (lambda: kiln.ops.elementwise_chain(t, ["relu", ("where", 1.0, "b")]),
             r"step 2 \(where\): an operand .* got str"),
            (lambda: kiln.ops.reduce(3, t), "reduce: unknown reduce op 3; the ops are sum"),
            (lambda: kiln.ops.reduce("bogus", t), "reduce: unknown reduce op 'bogus'"),
            (lambda: kiln.ops.elementwise(3, t), "unknown elementwise op 3; known: neg"),
            (lambda: kiln.ops.elementwise(None, t, t), "unknown elementwise op None"),
            (lambda: kiln.ops.elementwise(3, t, 1.0), "unknown elementwise op 3"),
            (lambda: kiln.ops.elementwise("where", t, 1.0), "unknown elementwise op 'where'"),
            (lambda: kiln.ops.elementwise("exp", t, 1.0), "exp takes 1 input, not 2"),
            (lambda: kiln.ops.cast(t, float), "cast: dtype float64 is not one kiln casts to"),
            (lambda: kiln.ops.gather(table, [[0, 1], [2]]),
             r"gather: indices must be a rectangular array of integers"),
            (lambda: kiln.ops.gather(table, [0, [1, 2]]), "gather: indices must be a rectangular")]:
        with pytest.raises(bad, match=message):
            call()


def test_flags_take_only_bools(device, rng):
    a = rng.standard_normal((4, 8)).astype(np.float32)
    t = kiln.tensor(a, device)
    q = kiln.tensor(rng.standard_normal((4, 8)).astype(np.float32), device)
    m = kiln.tensor(rng.standard_normal((8, 8)).astype(np.float32), device)
    for call, flag in [
            (lambda v: kiln.ops.reduce("sum", t, v), "reduce sum: keepdims"),
            (lambda v: kiln.ops.sum(t, 0, keepdims=v), "reduce sum: keepdims"),
            (lambda v: kiln.ops.reduce_axes("prod", t, 1, v), "reduce prod: keepdims"),
            (lambda v: kiln.ops.max(t, axis=0, keepdims=v), "max: keepdims"),
            (lambda v: kiln.ops.min(t, axis=1, keepdims=v), "min: keepdims"),
            (lambda v: kiln.ops.argmax(t, keepdims=v), "argmax: keepdims"),
            (lambda v: kiln.ops.argmin(t, 0, v), "argmin: keepdims"),
            (lambda v: kiln.ops.matmul(t, m, transpose_b=v), "matmul: transpose_b"),
            (lambda v: kiln.ops.attention(q, q, q, causal=v), "attention: causal"),
            (lambda v: kiln.ops.elementwise_chain(t, [("sub", 1.0, v)]),
             r"elementwise_chain: step 1 \(sub\): operand_first")]:
        for v in ("no", "yes", 1, 0, None, 1.0):
            with pytest.raises(kiln.ArgumentTypeError, match=f"{flag} must be a bool; got"):
                call(v)
        # numpy's bools are bools.
        np.testing.assert_array_equal(call(np.True_).numpy(), call(True).numpy())
        np.testing.assert_array_equal(call(np.False_).numpy(), call(False).numpy())
    for v in ("no", ""):  # max and min of two operands take no keepdims, and no "" for False
        with pytest.raises(kiln.ArgumentTypeError, match="min: keepdims must be a bool"):
            kiln.ops.min(t, t, keepdims=v)
    np.testing.assert_allclose(kiln.ops.sum(t, 1, keepdims=np.True_).numpy(),
                               a.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(
        kiln.ops.elementwise_chain(t, [("sub", 1.0, np.True_)]).numpy(), 1.0 - a)


def test_empty_tensors_are_checked_as_nonempty_ones(device):
    u = kiln.tensor(np.zeros((0, 3), np.uint32), device)
    i8 = kiln.tensor(np.zeros((0, 4), np.int8), device)
    five = kiln.tensor(np.zeros((0, 1, 1, 1, 2), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match="input X of exp is u32, but exp takes f32 or f16"):
        kiln.ops.exp(u)
    with pytest.raises(kiln.InvalidArgument, match="^mean: input X of reduce mean is u32"):
        kiln.ops.mean(u, axis=0)
    assert kiln.ops.sum(u, axis=0).numpy().tolist() == [0, 0, 0]
    assert kiln.ops.sum(u, axis=0).dtype == np.uint32
    assert kiln.ops.argmax(u, axis=1).shape == (0,)
    with pytest.raises(kiln.InvalidArgument, match="exp: an input is int8, but exp takes float32"):
        kiln.ops.exp(i8)
    assert kiln.ops.sum(i8, axis=0).numpy().tolist() == [0, 0, 0, 0]
    assert kiln.ops.matmul(five, np.ones((2, 3), np.float32)).shape == (0, 1, 1, 1, 3)
    with pytest.raises(kiln.InvalidArgument, match="at most 2\\^30 elements"):
        kiln.ops.sum(kiln.tensor(np.zeros((0, 2**33), np.float32), device), axis=0)
    # The limit is the library's kMaxTensorElements, 2^30: one more is refused.
    with pytest.raises(kiln.InvalidArgument, match="at most 2\\^30 elements"):
        kiln.ops.exp(kiln.tensor(np.zeros((0, 2**30 + 1), np.float32), device))
    assert kiln.ops.exp(kiln.tensor(np.zeros((0, 2**30), np.float32), device)).shape == (0, 2**30)
    assert kiln.ops.exp(kiln.tensor(np.zeros((0, 3), np.float32), device)).shape == (0, 3)


def test_zero_d_casts_gathers_and_numpy_methods(device, rng):
    a = rng.uniform(-3, 3, (2, 3)).astype(np.float32)
    t = kiln.tensor(a, device)
    s = t.sum()
    assert s.astype(np.int32).shape == () and int(s.astype(np.int32)) == int(np.float32(a.sum()))
    assert kiln.ops.cast(s.astype(np.int32), "float32").shape == ()
    np.testing.assert_array_equal(kiln.ops.gather(t, np.int32(1)).numpy(), a[1])
    q = kiln.tensor(rng.uniform(-1, 1, (2, 8, 4)).astype(np.float32), device)
    np.testing.assert_allclose(kiln.ops.attention(q, q, q, scale=np.float32(0.5)).numpy(),
                               kiln.ops.attention(q, q, q, scale=0.5).numpy())
    np.testing.assert_array_equal(t.clip(None, 1.0).numpy(), a.clip(None, 1.0))
    np.testing.assert_array_equal(t.clip(max=1.0).numpy(), a.clip(max=1.0))
    np.testing.assert_array_equal(t.clip(min=-1.0).numpy(), a.clip(min=-1.0))
    with pytest.raises(ValueError, match="give min or max"):
        t.clip()
    assert t.transpose(None).shape == (3, 2)
    np.testing.assert_allclose(float(np.sum(t)), a.sum(dtype=np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.mean(t, axis=0).numpy(), a.mean(axis=0), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="no out="):
        t.sum(out=t)


@pytest.mark.parametrize("shape,k", [((2, 3, 5, 7), 2), ((2, 3, 5, 7), 3), ((4, 33, 2), 2),
                                     ((2, 2, 3, 4, 5), 2), ((3, 1, 1000), 2),
                                     ((2, 2, 3, 4, 5), 1), ((2, 1, 3, 1, 2, 7), 1)], ids=str)
def test_norms_over_trailing_axes(device, rng, shape, k):
    # gamma of x's last k axes normalises over them together (PyTorch's
    # normalized_shape); an x of any rank works, viewed as [rows, features].
    a = (100 + rng.standard_normal(shape)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, shape[-k:]).astype(np.float32)
    b = rng.uniform(-1, 1, shape[-k:]).astype(np.float32)
    x = kiln.tensor(a, device)
    a64 = a.astype(np.float64)
    axes = tuple(range(-k, 0))
    mean = a64.mean(axes, keepdims=True)
    var = a64.var(axes, keepdims=True)
    got = kiln.ops.layer_norm(x, g, b)
    assert got.shape == shape
    _close(got.numpy(), (a64 - mean) / np.sqrt(var + 1e-5) * g + b, 5e-4)
    want = a64 / np.sqrt((a64 ** 2).mean(axes, keepdims=True) + 1e-6) * g
    got = kiln.ops.rms_norm(x, g)
    assert got.shape == shape
    _close(got.numpy(), want, 1e-5)
    np.testing.assert_array_equal(x.numpy(), a)  # the view leaves x as it was


@pytest.mark.parametrize("d", [7, 1000, 4097])
def test_layer_norm_of_equal_values_is_beta(device, rng, d):
    # The mean of a row of equal values is that value (a sum times f32(1 / d)
    # could be an ulp off, which eps 1e-12 magnifies to about 1).
    a = np.repeat(np.array([[100.0], [0.1], [3.0], [-7.25e6]], np.float32), d, axis=1)
    g = rng.uniform(0.5, 1.5, d).astype(np.float32)
    b = rng.uniform(-1, 1, d).astype(np.float32)
    got = kiln.ops.layer_norm(kiln.tensor(a, device), g, b, eps=1e-12).numpy()
    np.testing.assert_array_equal(got, np.broadcast_to(b, a.shape))
    got = kiln.ops.layer_norm(kiln.tensor(a, device), g, b, eps=0.0).numpy()
    assert np.isnan(got).all()  # 0 / 0, as numpy


def test_norm_parameters_name_the_axes(device):
    bad = kiln.InvalidArgument
    x = kiln.tensor(np.ones((2, 3, 4), np.float32), device)
    with pytest.raises(bad, match=r"layer_norm: beta has shape \(4,\); it must be \(3, 4\), "
                                  r"x's last 2 axes"):
        kiln.ops.layer_norm(x, np.ones((3, 4), np.float32), np.ones(4, np.float32))
    with pytest.raises(bad, match=r"rms_norm: gamma has shape \(2, 4\); it must be \(3, 4\)"):
        kiln.ops.rms_norm(x, np.ones((2, 4), np.float32))
    with pytest.raises(bad, match=r"rms_norm: gamma has shape \(\); it must be the shape of x's "
                                  r"last axis or axes \(x has shape \(2, 3, 4\)\)"):
        kiln.ops.rms_norm(x, np.array(1, np.float32))
    with pytest.raises(bad, match=r"gamma has shape \(1, 2, 3, 4\); it must be the shape"):
        kiln.ops.rms_norm(x, np.ones((1, 2, 3, 4), np.float32))
    # Empty: a result of x's shape, no kernel run; a 0 among the normalised axes too.
    for shape in [(0, 3, 4), (2, 0, 4)]:
        z = kiln.tensor(np.ones(shape, np.float32), device)
        g = np.ones(shape[1:], np.float32)
        assert kiln.ops.layer_norm(z, g, g).shape == shape
        assert kiln.ops.rms_norm(z, g).shape == shape


def test_arrays_of_ints_as_axes_shapes_and_bounds(device, rng):
    # numpy takes a 1-D integer array wherever it takes a list of ints.
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = kiln.tensor(a, device)
    order = np.array([2, 0, 1])
    np.testing.assert_array_equal(kiln.ops.permute(t, order).numpy(), a.transpose(order))
    np.testing.assert_array_equal(t.transpose(order).numpy(), a.transpose(order))
    np.testing.assert_array_equal(t.transpose(axes=order).numpy(), a.transpose(order))
    # An axis that is a 0-d tensor, in any position (its == is elementwise).
    one, zero = (kiln.tensor(np.array(v, np.int32), device) for v in (1, 0))
    two = kiln.tensor(np.array(2, np.int32), device)
    np.testing.assert_array_equal(t.transpose(one, zero, two).numpy(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(kiln.ops.slice(t, np.array([1]), np.array([2])).numpy(),
                                  a[1:2])
    np.testing.assert_allclose(kiln.ops.sum(t, axis=np.array([0, 2])).numpy(),
                               a.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(t.reshape(np.array([4, 6])).numpy(), a.reshape(4, 6))
    np.testing.assert_array_equal(kiln.ops.pad(t, np.array([0, 1, 0]), 0).numpy(),
                                  np.pad(a, [(0, 0), (1, 0), (0, 0)]))
    # An empty list of indices gathers no rows (numpy reads [] as float64).
    table = kiln.tensor(a[0], device)
    assert kiln.ops.gather(table, []).shape == (0, 4)
    with pytest.raises(kiln.InvalidArgument, match="gather: indices must be integers; got float"):
        kiln.ops.gather(table, np.array([], np.float64))


def test_errors_name_the_function_called_and_its_ranks(device):
    with pytest.raises(kiln.InvalidArgument, match="^argmax: axis is 1"):
        kiln.ops.argmax(np.ones(4, np.int8), axis=1)
    u = kiln.tensor(np.ones(4, np.uint32), device)
    for call, name in ((lambda: kiln.ops.mean(u), "mean"), (lambda: u.mean(), "mean"),
                       (lambda: kiln.ops.reduce_axes("mean", u), "reduce_axes")):
        with pytest.raises(kiln.InvalidArgument, match=f"^{name}: "):
            call()
    five = np.ones((1, 1, 4, 4, 1), np.float32)
    for call, want in (
            (lambda: kiln.ops.conv2d(five, np.ones((1, 1, 1, 1), np.float32)),
             r"input X of conv2d has shape \[1, 1, 4, 4, 1\]; it must be NHWC \(rank 4\)"),
            (lambda: kiln.ops.max_pool2d(five, 2),
             r"input X of max_pool2d has shape \[1, 1, 4, 4, 1\]; it must be NHWC"),
            (lambda: kiln.ops.gather(np.array(1.0, np.float32), [0]),
             r"shape \[\] of rank 0; it must be 2-D \[V, D\]"),
            (lambda: kiln.ops.reshape(np.ones((2, 3, 4), np.float32), [2**40, -1]),
             r"cannot infer dimension 1 of \[1099511627776, -1\] for X of shape \[2, 3, 4\]"),
            (lambda: kiln.ops.reshape(np.ones((2, 3, 4), np.float32), [2, 3, 2, 3, 1]),
             r"reshape: cannot reshape a tensor of 24 elements into shape \(2, 3, 2, 3, 1\)")):
        with pytest.raises(kiln.InvalidArgument, match=want):
            call()


def test_max_and_min_of_bools_are_bools(device, rng):
    b = rng.integers(0, 2, (5, 7)).astype(np.bool_)
    t = kiln.tensor(b, device)
    for got, want in ((kiln.ops.amax(t, axis=1), b.max(axis=1)),
                      (kiln.ops.min(t, axis=0, keepdims=True), b.min(axis=0, keepdims=True)),
                      (t.max(), b.max()), (t.min(axis=()), b.min(axis=())),
                      (kiln.ops.amax(kiln.tensor(np.zeros((0, 2), bool), device), axis=1),
                       np.zeros((0, 2), bool).max(axis=1))):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got.numpy(), want)
    assert kiln.ops.sum(t).dtype == np.int32  # (sums count)


def test_tensors_of_rank_above_four(device, rng):
    # Kernels take ranks 1 to 4; elementwise operators, reductions, permutes
    # and slices of higher ranks run on views with merged axes (or in
    # passes), so every result matches numpy's.
    a = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    six = rng.standard_normal((3, 1, 4, 2, 5, 3)).astype(np.float32)
    b = rng.standard_normal((1, 1, 5, 6)).astype(np.float32)
    c = rng.standard_normal((1, 2, 1, 1, 5, 6)).astype(np.float32)
    t, t6, tb, tc = (kiln.tensor(v, device) for v in (a, six, b, c))

    def same(got, want, exact=True):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got.numpy(), want)
        else:
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)

    same(t + tb, a + b)
    same(t * tb * tc, a * b * c)
    same(t * 2 + 1, a * 2 + 1)
    same(kiln.ops.exp(t), np.exp(a), exact=False)
    same(t > tb, a > b)
    same(kiln.ops.where(t > 0, t, tb), np.where(a > 0, a, b))
    same(kiln.ops.where(t > 0, t, 0.5), np.where(a > 0, a, np.float32(0.5)))
    same(kiln.ops.elementwise_chain(t, ["relu", ("add", tb), ("mul", tc)]),
         (np.maximum(a, 0) + b) * c)
    same(kiln.fuse(lambda x, y: x * kiln.ops.sigmoid(x) + y)(t, tb), a / (1 + np.exp(-a)) + b,
         exact=False)
    for x, v in ((t, a), (t6, six)):
        r = v.ndim
        for axes in (None, -1, (1, 2), (0, 2, 4), (1, 3), (0, r - 1)):
            for keepdims in (False, True):
                same(kiln.ops.sum(x, axes, keepdims), v.sum(axes, keepdims=keepdims), exact=False)
                same(kiln.ops.amax(x, axes, keepdims), v.max(axes, keepdims=keepdims))
        for axis in range(r):
            same(kiln.ops.argmin(x, axis), v.argmin(axis).astype(np.int32))
        for perm in ([4, 3, 2, 1, 0], [1, 0, 3, 2, 4], [2, 4, 0, 3, 1], [0, 1, 2, 4, 3]):
            perm = perm + [5] if r == 6 else perm
            same(kiln.ops.permute(x, perm), v.transpose(perm))
        same(x.T, v.T)
        for key in ((1,), (..., 2), (slice(None, None, -1), 0, slice(1, 3), ..., slice(None, None, 2)),
                    (slice(1, 2), slice(None, None, -2), slice(None), slice(3, 0, -1)),
                    (slice(None, None, 2),) * r, (slice(None, None, -1),) * r):
            same(x[key], v[key])
        same(x.reshape(-1, 1, 3, 1, 1, 1), v.reshape(-1, 1, 3, 1, 1, 1))
        same(x.astype(np.int32), v.astype(np.int32))
    for axis in range(5):
        e = np.exp(a - a.max(axis, keepdims=True))
        same(kiln.ops.softmax(t, axis), e / e.sum(axis, keepdims=True), exact=False)
        same(kiln.ops.log_softmax(t, axis), np.log(e / e.sum(axis, keepdims=True)), exact=False)
        part = t[(slice(None),) * axis + (slice(0, 1),)]
        same(kiln.ops.concat([t, part, t], axis),
             np.concatenate([a, part.numpy(), a], axis))
    for before, after in (((1, 0, 0, 0, 0), (0, 0, 0, 0, 2)), ((0, 1, 0, 2, 0), (1, 0, 0, 0, 1)),
                          ((1, 1, 1, 1, 1), (0, 2, 0, 1, 0)), ((0,) * 5, (0,) * 5)):
        same(kiln.ops.pad(t, before, after, value=-1.5),
             np.pad(a, list(zip(before, after)), constant_values=-1.5))
    x = rng.standard_normal((2, 3, 1, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 1, 4, 6, 7)).astype(np.float32)
    bias = rng.standard_normal(7).astype(np.float32)
    res = rng.standard_normal((2, 3, 1, 4, 5, 7)).astype(np.float32)
    same(kiln.ops.matmul(x, w, bias=bias, activation="relu", residual=res),
         np.maximum(x @ w + bias, 0) + res, exact=False)
    same(kiln.ops.matmul(x, w[0, 0, 0]), x @ w[0, 0, 0], exact=False)
    with pytest.raises(kiln.InvalidArgument, match=r"matmul: A \[2, 1, 2, 1, 3, 3\] and B .*more "
                                                   r"than 2 batch axes remain"):
        kiln.ops.matmul(np.ones((2, 1, 2, 1, 3, 3), np.float32),
                        np.ones((1, 2, 1, 2, 3, 3), np.float32))
    q = rng.standard_normal((2, 2, 3, 8, 8)).astype(np.float32)
    scores = q @ np.swapaxes(q, -1, -2) / np.float32(np.sqrt(8))
    p = np.exp(scores - scores.max(-1, keepdims=True))
    same(kiln.ops.attention(q, q, q), (p / p.sum(-1, keepdims=True)) @ q, exact=False)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    idx = rng.integers(0, 10, (2, 3, 1, 2, 2)).astype(np.int32)
    same(kiln.ops.gather(kiln.tensor(table, device), idx), table[idx])
    with pytest.raises(kiln.InvalidArgument, match=r"concat: shapes \(2, 3, 4, 5, 6\) and "
                                                   r"\(2, 2, 4, 5, 6\) differ in axis 1"):
        kiln.ops.concat([t, t[:, :2]], 0)
    m = a > 0
    same(kiln.ops.amax(kiln.tensor(m, device), (1, 2)), m.max((1, 2)))
    same(kiln.ops.sum(kiln.tensor(m, device), (0, 4)), m.sum((0, 4)).astype(np.int32))
    e = np.zeros((2, 0, 3, 1, 4), np.float32)
    te = kiln.tensor(e, device)
    same(kiln.ops.sum(te, 1), e.sum(1))
    same(kiln.ops.permute(te, [4, 3, 2, 1, 0]), e.transpose(4, 3, 2, 1, 0))
    same(te[1:, :, ::2], e[1:, :, ::2])
    same(te + 1, e + 1)
    same(kiln.ops.softmax(te, 2), e)
    same(kiln.ops.pad(te, 1, 0), np.pad(e, [(1, 0)] * 5))
    with pytest.raises(kiln.InvalidArgument, match=r"reduce max: inputs of shapes \(2, 0, 3, 1, "
                                                   r"4\): zero-size array"):
        kiln.ops.amax(te, 1)
    alternating = kiln.tensor(np.ones((2, 1, 2, 1, 2, 1), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match=r"^add: inputs of shapes .*more than 4 remain"):
        alternating + kiln.tensor(np.ones((1, 2, 1, 2, 1, 2), np.float32), device)
    with pytest.raises(kiln.InvalidArgument, match=r"permute: axes must list each of x's 5 axes"):
        kiln.ops.permute(t, [0, 0, 1, 2, 3])


def test_rank_above_four_edges(device):
    # Empty tensors reshape, shapes that do not broadcast say so, and a
    # float16 reduction over alternating axes rounds once (summed in float32).
    e = kiln.tensor(np.zeros((1, 1, 1, 1, 0), np.float32), device)
    assert e.reshape(-1).shape == (0,) and e.flatten().shape == (0,)
    assert (+kiln.tensor(np.zeros((1, 1, 1, 1, 0), np.uint32), device)).shape == (1, 1, 1, 1, 0)
    with pytest.raises(kiln.InvalidArgument, match=r"^add: shapes \[2, 1, 1, 1, 3\] and \[4\] do "
                                                   r"not broadcast"):
        kiln.tensor(np.ones((2, 1, 1, 1, 3), np.float32), device) + np.ones(4, np.float32)
    with pytest.raises(kiln.InvalidArgument, match=r"argmax: inputs of shapes \(2, 0, 1, 3, 1\)"):
        kiln.ops.argmax(kiln.tensor(np.zeros((2, 0, 1, 3, 1), np.float32), device), axis=1)


def test_float16_reduction_over_alternating_axes_rounds_once(device):
    require_feature(device, "shader-f16")
    w = np.zeros((2, 2, 2, 2, 2), np.float16)
    w[0, :, 0] = [1024, 0.5]
    w[0, :, 1] = [0.5, 0]
    t = kiln.tensor(w, device)
    for got, want in ((t.sum(axis=(0, 2, 4)), 1025), (t.mean(axis=(0, 2, 4)), 128.125)):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got.numpy(), np.full((2, 2), want, np.float16))


def test_uint32_membership_and_mixed_where(device):
    u = kiln.tensor(np.array([5, 0xFFFFFFFF], np.uint32), device)
    assert 5 in u and 0xFFFFFFFF in u and np.uint32(5) in u
    assert -1 not in u and 6 not in u and 5.5 not in u and 2**32 + 5 not in u
    with pytest.raises(kiln.InvalidArgument, match="where: a is uint32 and b int32"):
        kiln.ops.where(np.array([True, False]), u, np.array([3, 4], np.int32))
    with pytest.raises(kiln.InvalidArgument, match="the tensor operand is bool"):
        kiln.ops.where(np.array([True, False]), kiln.tensor(np.array([True, False]), device),
                       0xFFFFFFFF)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_byte_tensors_move_and_cast(device, rng, dtype):
    # int8 and uint8 tensors (bytes packed four to a word) move and cast
    # through int32: unpacked, moved, packed back; every value kept.
    info = np.iinfo(dtype)
    other = "uint8" if dtype == "int8" else "int8"

    def same(got, want):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)

    for shape in [(7,), (3, 5), (1,), (4,), (2, 3, 2, 3, 2), (5, 1, 3)]:
        a = rng.integers(info.min, info.max + 1, shape).astype(dtype)
        a.reshape(-1)[:2] = [info.min, info.max][:a.size]
        t = kiln.tensor(a, device)
        same(t.T, a.T)
        same(t.reshape(-1), a.reshape(-1))
        same(t[::-1], a[::-1])
        same(kiln.ops.concat([t, t], 0), np.concatenate([a, a], 0))
        same(kiln.ops.pad(t, 1, 2, value=info.max),
             np.pad(a, [(1, 2)] * a.ndim, constant_values=info.max))
        for to in ("float32", "int32", "bool", other):
            same(t.astype(to), a.astype(to))
        same(t.astype("uint32"), a.astype(np.int64).astype(np.uint32))
        same(+t, +a)
        same(copy.copy(t), a)
        m = a > 0
        same(kiln.ops.where(kiln.tensor(m, device), t, 3), np.where(m, a, a.dtype.type(3)))
        same(kiln.ops.where(t, t, t), a)
    table = rng.integers(info.min, info.max + 1, (10, 3)).astype(dtype)
    same(kiln.ops.gather(kiln.tensor(table, device), [3, 9, 0]), table[[3, 9, 0]])
    # To a byte: through int32 (floats truncated toward zero), its low 8 bits.
    ints = np.array([300, -1, 128, -129, 0], np.int32)
    same(kiln.tensor(ints, device).astype(dtype), ints.astype(dtype))
    floats = np.array([1.7, -1.7, 127.9, -0.0, np.nan], np.float32)
    same(kiln.tensor(floats, device).astype(dtype),
         np.array([1, -1, 127, 0, 0]).astype(dtype))
    empty = kiln.tensor(np.zeros((0, 3), dtype), device)
    same(empty.astype("float32"), np.zeros((0, 3), np.float32))
    same(empty.T, np.zeros((3, 0), dtype))
    small = kiln.tensor(np.array([5, 100], dtype), device)
    assert 5 in small and 100 in small and 6 not in small and 1000 not in small
    article = "an" if dtype == "int8" else "a"
    for bad, message in ((lambda: kiln.ops.pad(small, 1, 1, value=256),
                          f"not {article} {dtype} value"),
                         (lambda: kiln.ops.where(np.array([True, False]), small, 1000),
                          f"where: 1000 is not {article} {dtype} value"),
                         (lambda: kiln.ops.where(np.array([True, False]), small,
                                                 np.array([1, 2], other)),
                          f"where: a is {dtype} and b {other}"),
                         (lambda: small + 1000, f"add: 1000 is not {article} {dtype} value"),
                         (lambda: kiln.ops.sqrt(small), f"sqrt: an input is {dtype}, but sqrt"),
                         (lambda: kiln.ops.pad(small, 1, 1, "x"),
                          "pad: value: must be a number; got str")):
        with pytest.raises(kiln.InvalidArgument, match=message):
            bad()
    # Byte tensors index a gather as numpy's byte arrays do.
    same(kiln.ops.gather(kiln.tensor(table, device), small.astype("int32")[:1]), table[[5]])
    same(kiln.ops.gather(kiln.tensor(table, device), kiln.tensor(np.array([1, 2], dtype), device)),
         table[[1, 2]])


def test_byte_tensors_too_large_to_unpack_say_so(device):
    most = device.limits["max_storage_buffer_binding_size"]
    if most > 2**28:
        pytest.skip(f"{device} binds {most} bytes of one buffer: the tensor would take "
                    f"{most // 4 + 1} bytes of host memory")
    big = kiln.tensor(np.zeros(most // 4 + 1, np.uint8), device)
    with pytest.raises(kiln.InvalidArgument, match=r"^slice: a uint8 tensor moves as its values "
                                                   r"in int32"):
        big[5:12]


def test_numpy_conveniences(device, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = kiln.tensor(x, device)

    def same(got, want, exact=True):
        want = np.asarray(want)
        assert got.dtype == want.dtype and tuple(got.shape) == want.shape, (got, want.dtype)
        if exact:
            np.testing.assert_array_equal(got.numpy(), want)
        else:
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=1e-6)

    same(kiln.ops.stack([t, t + 1]), np.stack([x, x + 1]))
    same(kiln.ops.stack([t, t, t], axis=-1), np.stack([x, x, x], axis=-1))
    same(kiln.ops.expand_dims(t, (0, -1)), np.expand_dims(x, (0, -1)))
    same(kiln.ops.squeeze(kiln.tensor(x[:1, :, None], device)), np.squeeze(x[:1, :, None]))
    same(np.squeeze(kiln.tensor(x[:1], device), 0), np.squeeze(x[:1], 0))
    same(t.var(axis=1), x.var(axis=1), exact=False)
    same(np.var(t, ddof=1), x.var(ddof=1), exact=False)
    same(np.std(t, axis=(0, 2), keepdims=True), x.std(axis=(0, 2), keepdims=True), exact=False)
    same(kiln.ops.var(kiln.tensor(np.arange(7, dtype=np.int32), device)),
         np.float32(np.arange(7).var()), exact=False)
    with warnings.catch_warnings():  # (numpy's for N - ddof <= 0)
        warnings.simplefilter("ignore")
        same(t.var(axis=0, ddof=2), x.var(axis=0, ddof=2))
    same(kiln.full((2, 3), 7, device=device), np.full((2, 3), 7, np.int32))
    same(kiln.full(3, 1.5, device=device), np.full(3, 1.5, np.float32))
    same(kiln.full(2, True, device=device), np.full(2, True))
    same(kiln.full((2,), 200, "uint8", device), np.full(2, 200, np.uint8))
    same(kiln.zeros((2, 0), device=device), np.zeros((2, 0), np.float32))
    same(kiln.ones(4, "int32", device), np.ones(4, np.int32))
    same(kiln.zeros_like(t), np.zeros_like(x))
    same(kiln.ones_like(t, dtype="uint32"), np.ones(x.shape, np.uint32))
    same(kiln.arange(5, device=device), np.arange(5, dtype=np.int32))
    same(kiln.arange(0, 1, 0.25, device=device), np.arange(0, 1, 0.25, dtype=np.float32))
    same(kiln.arange(5, 0, -2, device=device), np.arange(5, 0, -2, dtype=np.int32))
    same(kiln.arange(5, 0, device=device), np.arange(5, 0, dtype=np.int32))
    same(kiln.arange(-1.5, 2.0, 0.1, device=device), np.arange(-1.5, 2.0, 0.1).astype(np.float32))
    same(kiln.arange(2.0, -1.0, -0.75, device=device), np.arange(2.0, -1.0, -0.75, np.float32))
    same(kiln.arange(3, dtype="uint8", device=device), np.arange(3, dtype=np.uint8))
    same(kiln.arange(2, dtype="bool", device=device), np.arange(2, dtype=np.bool_))
    same(kiln.arange(-0.0, 1.0, 0.5, device=device), np.arange(-0.0, 1.0, 0.5, np.float32))
    same(kiln.arange(np.int64(2**31 - 3), 2**31 - 1, device=device),
         np.arange(2**31 - 3, 2**31 - 1, dtype=np.int32))
    for call, error, message in (
            (lambda: kiln.full(2, 300, "int8", device), kiln.InvalidArgument,
             "kiln.full: fill_value: 300 is not an int8 value"),
            (lambda: kiln.full(2, "a", device=device), TypeError, "fill_value must be a number"),
            (lambda: kiln.full((2, -1), 1, device=device), kiln.InvalidArgument,
             "kiln.full: shape .2, -1. has a negative dimension"),
            (lambda: kiln.full(2**40, 1, device=device), kiln.InvalidArgument,
             r"kiln.full: shape \[1099511627776\] of int32 takes 4398046511104 bytes, more "
             r"than the device's maxBufferSize"),
            (lambda: kiln.full(3, 1, "float64", device), kiln.InvalidArgument,
             "kiln.full: dtype float64 is not one of kiln's"),
            (lambda: kiln.arange(0, 5, 0, device=device), kiln.InvalidArgument, "step is 0"),
            # Refused before any host array is made.
            (lambda: kiln.arange(0, 2**40, device=device), kiln.InvalidArgument,
             r"kiln.arange: shape \[1099511627776\] of int32 takes 4398046511104 bytes"),
            (lambda: kiln.arange(2**31 - 2, 2**31 + 1, device=device), kiln.InvalidArgument,
             r"kiln.arange: the values run from 2147483646 to 2147483648, outside int32's range"),
            (lambda: kiln.arange(-1, 2, dtype="uint32", device=device), kiln.InvalidArgument,
             r"kiln.arange: the values run from -1 to 1, outside uint32's range"),
            (lambda: kiln.arange(0.0, float("inf"), device=device), kiln.InvalidArgument,
             "kiln.arange: start, stop and step must be finite"),
            (lambda: kiln.arange(3, dtype="float64", device=device), kiln.InvalidArgument,
             "kiln.arange: dtype float64 is not one of kiln's"),
            (lambda: kiln.arange(0, 1e308, 1e-308, device=device), kiln.InvalidArgument,
             "kiln.arange: start 0.0, stop 1e.308 and step 1e-308 give more values than"),
            (lambda: kiln.arange(0.0, 1.0, 1e-300, device=device), kiln.InvalidArgument,
             r"kiln.arange: shape \[\d+\] of float32 takes \d+ bytes, more than"),
            (lambda: kiln.arange(0.5, 3, dtype="int32", device=device), kiln.InvalidArgument,
             "kiln.arange: dtype int32 takes int start, stop and step"),
            (lambda: kiln.arange(3, dtype="bool", device=device), kiln.InvalidArgument,
             "kiln.arange: dtype bool holds at most 2 values; got 3"),
            (lambda: kiln.ops.squeeze(t, 1), kiln.InvalidArgument,
             "squeeze: axis 1 has extent 3"),
            (lambda: kiln.ops.stack([t, t[0]]), kiln.InvalidArgument,
             r"stack: tensors\[1\] has shape \(3, 4\)"),
            (lambda: kiln.ops.expand_dims(t, (0, 0)), kiln.InvalidArgument, "repeats an axis"),
            (lambda: t.var(out=np.zeros(())), TypeError, "out")):
        with pytest.raises(error, match=message):
            call()


def test_rank_five_and_zero_d_edges(device, rng):
    """var and std above rank 4 with kept and reduced axes interleaved; huge
    slice steps above rank 4; a 0-d tensor sliced, and reduced over numpy's
    axis 0 or -1; negative padding named at any rank; var's dtype a float."""
    t = lambda a: kiln.tensor(a, device)  # noqa: E731
    x = rng.standard_normal((2, 3, 2, 3, 2, 2)).astype(np.float32)
    for axis, ddof, keepdims in (((1, 3), 0, False), ((0, 2, 4), 1, True), ((1, 3, 5), 0, True)):
        _close(kiln.ops.var(t(x), axis=axis, ddof=ddof, keepdims=keepdims).numpy(),
               x.astype(np.float64).var(axis=axis, ddof=ddof, keepdims=keepdims), 1e-5)
        _close(t(x).std(axis=axis, ddof=ddof, keepdims=keepdims).numpy(),
               x.astype(np.float64).std(axis=axis, ddof=ddof, keepdims=keepdims), 1e-5)
    z = np.arange(2 * 10 * 3 * 3 * 3, dtype=np.float32).reshape(2, 10, 3, 3, 3)
    for key in ((slice(None), slice(None, None, 10**18), slice(1, None), slice(None, None, -1), 0),
                (slice(None, None, 2**62), 0), (slice(None, None, -2**62), 1, slice(None),
                                                slice(None, None, 2**40))):
        got = t(z)[key].numpy()
        assert got.shape == z[key].shape and np.array_equal(got, z[key]), key
    s0 = t(np.float32(3))
    y = kiln.ops.slice(s0, [])
    assert y.shape == () and y.numpy() == 3
    assert kiln.ops.sum(s0, 0).numpy() == 3 and kiln.ops.max(s0, -1).shape == ()
    assert kiln.ops.argmax(s0).numpy() == 0 and kiln.ops.squeeze(s0, 0).shape == ()
    assert s0.any(axis=0).numpy() == np.True_
    with pytest.raises(kiln.InvalidArgument, match="axis is 1; for a tensor of rank 0"):
        kiln.ops.sum(s0, 1)
    with pytest.raises(kiln.InvalidArgument,
                       match="pad: axis 5 is padded by -1 and 0; padding must be at least 0"):
        kiln.ops.pad(t(np.zeros((2,) * 6, np.float32)), [0] * 5 + [-1], 0)
    with pytest.raises(kiln.InvalidArgument, match="Tensor.var: dtype must be float32 or float16"):
        t(x).var(dtype=np.int32)
    with pytest.raises(kiln.InvalidArgument, match="Tensor.std: dtype must be float32 or float16"):
        t(x).std(dtype="uint8")
