"""kiln.fuse: elementwise functions traced into one kernel, against numpy on
fresh random inputs (outputs are new tensors: the runtime poisons nothing
here, so every element is compared)."""

import numpy as np
import pytest

import kiln
from conftest import require_feature


def _edgy(rng, shape):
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    flat = x.reshape(-1)
    edges = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0]
    flat[:min(len(edges), flat.size)] = edges[:flat.size]
    return x


@pytest.mark.parametrize("shapes", [((7, 33), (33,)), ((3, 4099), (1,)), ((1, 1), (1, 1)),
                                    ((1000,), (5, 1, 1000))], ids=str)
def test_silu_plus_bias(device, rng, shapes):
    xs, bs = shapes
    x = rng.uniform(-3, 3, xs).astype(np.float32)
    b = rng.standard_normal(bs).astype(np.float32)

    @kiln.fuse
    def silu_plus(x, b):
        return x * kiln.ops.sigmoid(x) + b

    y = silu_plus(kiln.tensor(x, device), kiln.tensor(b, device))
    assert y.shape == np.broadcast_shapes(xs, bs) and y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), x / (1 + np.exp(-x)) + b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(7, 33), (3, 4099), (1, 1)], ids=str)
def test_integer_and_bool_expression_is_exact(device, rng, shape):
    x = _edgy(rng, shape) * np.float32(1e9)
    i = rng.integers(-2**31, 2**31, shape[-1:], dtype=np.int64).astype(np.int32)
    m = rng.random((shape[0], 1)) > 0.5

    @kiln.fuse
    def f(x, i, m):
        big = (abs(x) > 1) & m
        v = kiln.ops.where(big, x.astype(np.int32) // 3, i)
        return v * v + (~m) - (i >> 3)

    y = f(kiln.tensor(x, device), kiln.tensor(i, device), kiln.tensor(m, device))
    assert y.dtype == np.int32
    with np.errstate(invalid="ignore", over="ignore"):
        xi = np.where(np.isnan(x), 0, np.clip(x, -2**31, 2147483520)).astype(np.int64)
        v = np.where((np.abs(x) > 1) & m, xi // 3, i).astype(np.int64)
        want = ((v * v + (~m) - (i >> 3)) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(y.numpy(), want)


def test_comparisons_give_bools_and_division_is_true(device, rng):
    a = rng.integers(-50, 50, (7, 33)).astype(np.int32)
    t = kiln.tensor(a, device)
    half = kiln.fuse(lambda a: a / 2)(t)
    assert half.dtype == np.float32
    np.testing.assert_array_equal(half.numpy(), a / np.float32(2))
    ge = kiln.fuse(lambda a: (a // 4 >= 1) | (a % 7 == 0))(t)
    assert ge.dtype == np.bool_
    np.testing.assert_array_equal(ge.numpy(), (a // 4 >= 1) | (a % 7 == 0))
    as_bool = kiln.fuse(lambda a: (a - 3).astype(bool))(t)
    np.testing.assert_array_equal(as_bool.numpy(), (a - 3).astype(bool))


def test_a_value_less_itself_keeps_ieee_results(device):
    # x - x is NaN for NaN and infinities, x / x NaN for zeros too: a fused
    # expression subtracting (or dividing) a value from itself must not
    # become 0 (or 1), as a driver assuming finite values folds it.
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0, -3.5], np.float32)
    t = kiln.tensor(x, device)
    with np.errstate(all="ignore"):
        for f in (lambda a: a - a, lambda a: a / a, lambda a: (a + 1.0) - (a + 1.0),
                  lambda a: a // a, lambda a: (a - a) == 0):
            got, want = kiln.fuse(f)(t).numpy(), np.asarray(f(x))
            np.testing.assert_array_equal(got, want)
            if want.dtype != np.bool_:
                finite = ~np.isnan(want)
                assert (np.signbit(got) == np.signbit(want))[finite].all()


def test_fma_by_a_constant_zero_keeps_ieee_results(device):
    # fma(x, 0.0, c) is x * 0.0 + c: NaN for NaN and infinities, and the
    # zero's sign for c = -0.0; a driver assuming finite values folds it to c.
    # 7 elements, and 4097 (vectors and a tail); f16 where the device has it.
    edge = [np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0, -3.5]
    dtypes = ["float32"] + (["float16"] if device.has_feature("shader-f16") else [])
    for dtype in dtypes:
        for x in (np.array(edge, dtype), np.resize(np.array(edge, dtype), 4097)):
            t = kiln.tensor(x, device)
            for zero, c in ((0.0, 1.0), (-0.0, -0.0), (0.0, 0.0)):
                with np.errstate(invalid="ignore"):
                    want = x * x.dtype.type(zero) + x.dtype.type(c)
                for got in (kiln.fuse(lambda a: kiln.ops.fma(a, zero, c))(t).numpy(),
                            kiln.fuse(lambda a: kiln.ops.fma(zero, a, c))(t).numpy(),
                            kiln.ops.elementwise_chain(t, [("fma", zero, c)]).numpy()):
                    np.testing.assert_array_equal(got, want)
                    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all(), \
                        (dtype, x.size, zero, c, got)


def test_clip_fma_and_signed_zero(device, rng):
    x = _edgy(rng, (5, 40))
    lo = rng.uniform(-2, 0, (5, 1)).astype(np.float32)

    @kiln.fuse
    def f(x, lo):
        return kiln.ops.where(x > 0, kiln.ops.fma(x, 2.0, -0.5).clip(lo, 1.5), -0.0)

    y = f(kiln.tensor(x, device), kiln.tensor(lo, device)).numpy()
    with np.errstate(invalid="ignore"):
        want = np.where(x > 0, np.clip(x * 2 - 0.5, lo, 1.5), np.float32(-0.0))
    np.testing.assert_allclose(y, want, rtol=1e-6)
    np.testing.assert_array_equal(np.signbit(y), np.signbit(want))


def test_clip_as_tensors_have_it(device, rng):
    # Traced values clip as tensors do: either bound None, by keyword, and
    # through np.clip.
    x = rng.uniform(-3, 3, (7, 33)).astype(np.float32)
    t = kiln.tensor(x, device)
    for f, want in ((lambda a: a.clip(None, 1), np.clip(x, None, 1)),
                    (lambda a: a.clip(max=1), np.clip(x, None, 1)),
                    (lambda a: a.clip(min=-1), np.clip(x, -1, None)),
                    (lambda a: np.clip(a, -1, 1) * 2, np.clip(x, -1, 1) * 2)):
        np.testing.assert_array_equal(kiln.fuse(f)(t).numpy(), want)
    with pytest.raises(ValueError, match="give min or max"):
        kiln.fuse(lambda a: a.clip())(t)


def _fused_and_eager(f, *args):
    """f run fused and eagerly on the same tensors: (fused, eager) results."""
    return kiln.fuse(f)(*args), f(*args)


def _same(fused, eager):
    assert (fused.dtype, fused.shape) == (eager.dtype, eager.shape)
    np.testing.assert_array_equal(fused.numpy(), eager.numpy())


def test_float_numbers_beside_integers_compute_as_unfused(device, rng):
    # A float bound or number beside an int32 or bool value computes in
    # float32, fused as eager.
    a = rng.integers(-50, 50, (7, 33)).astype(np.int32)
    m = rng.random((7, 33)) > 0.5
    for x in (kiln.tensor(a, device), kiln.tensor(m, device)):
        for f in (lambda v: v.clip(-2.5, 7.25), lambda v: kiln.ops.clip(v, 0, 0.5),
                  lambda v: np.clip(v, -1.5, None) * 2, lambda v: v * 1.5 + 1):
            fused, eager = _fused_and_eager(f, x)
            assert fused.dtype == np.float32
            _same(fused, eager)
    want = np.clip(a, -2.5, 7.25).astype(np.float32)
    np.testing.assert_array_equal(kiln.fuse(lambda v: v.clip(-2.5, 7.25))(
        kiln.tensor(a, device)).numpy(), want)


def test_integer_division_beside_float16_divides_in_float16(device, rng):
    require_feature(device, "shader-f16")
    a = rng.integers(-50, 50, (7, 33)).astype(np.int32)
    h = (rng.standard_normal((33,)) + 4).astype(np.float16)
    ta, th = kiln.tensor(a, device), kiln.tensor(h, device)
    for f in (lambda a, h: a / h, lambda a, h: h / a, lambda a, h: (a / h) / 3):
        fused, eager = _fused_and_eager(f, ta, th)
        assert fused.dtype == np.float16
        _same(fused, eager)


def test_float16(device, rng):
    require_feature(device, "shader-f16")
    x = rng.standard_normal((7, 33)).astype(np.float16)
    y = kiln.fuse(lambda x: (kiln.ops.exp(x * 0.5) + x).astype(np.float32))(
        kiln.tensor(x, device))
    assert y.dtype == np.float32
    h = x.astype(np.float32)
    np.testing.assert_allclose(y.numpy(), np.exp(h * 0.5) + h, rtol=3e-3, atol=3e-3)


def test_traced_once_per_signature_and_one_kernel(device, rng):
    calls = []

    @kiln.fuse
    def f(x, y):
        calls.append((x.shape, x.dtype, x.ndim, x.size))
        return kiln.ops.tanh(x) * y - y

    a = kiln.tensor(rng.standard_normal((7, 33)).astype(np.float32), device)
    b = kiln.tensor(rng.standard_normal(33).astype(np.float32), device)
    before = len(device._cache)
    f(a, b)
    f(a, b)
    assert calls == [((7, 33), np.float32, 2, 231)]
    assert len(device._cache) == before + 1  # one program, for the whole expression
    five = kiln.tensor(np.ones(5, np.float32), device)
    np.testing.assert_allclose(f(five, five).numpy(), np.tanh(np.ones(5)) - 1, rtol=1e-6)
    assert len(calls) == 2  # a new signature traces again


def test_unused_arguments_and_empty_tensors(device, rng):
    f = kiln.fuse(lambda x, unused: x + 1)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(f(kiln.tensor(x, device), np.zeros(9, np.int32)).numpy(), x + 1)
    e = kiln.fuse(lambda x, y: x > y)(kiln.tensor(np.zeros((0, 4), np.float32), device),
                                      kiln.tensor(np.zeros(4, np.float32), device))
    assert e.shape == (0, 4) and e.dtype == np.bool_
    # numpy arrays are arguments too (copied to the device of the tensors).
    g = kiln.fuse(lambda a, b: a * b)(kiln.tensor(x, device), x)
    np.testing.assert_allclose(g.numpy(), x * x)


def test_errors(device):
    x = kiln.tensor(np.ones((3, 4), np.float32), device)
    i = kiln.tensor(np.ones(4, np.int32), device)
    for not_a_function in (3, None, "relu"):
        with pytest.raises(kiln.ArgumentTypeError, match="kiln.fuse takes a function"):
            kiln.fuse(not_a_function)
    with pytest.raises(kiln.InvalidArgument, match="argument 1 is a float"):
        kiln.fuse(lambda a, b: a * b)(x, 2.0)
    with pytest.raises(kiln.InvalidArgument, match="operands are its arguments"):
        kiln.fuse(lambda a: a * x)(x)
    with pytest.raises(kiln.InvalidArgument, match="not elementwise"):
        kiln.fuse(lambda a: kiln.ops.sum(a))(x)
    for method in (lambda a: a.sum(), lambda a: a[0], lambda a: a @ a.T, lambda a: x @ a,
                   lambda a: a.reshape(12)):
        with pytest.raises(kiln.InvalidArgument, match="of a traced value is not elementwise"):
            kiln.fuse(method)(x)
    with pytest.raises(kiln.InvalidArgument, match="no truth value"):
        kiln.fuse(lambda a: a if a > 0 else -a)(x)
    with pytest.raises(kiln.InvalidArgument, match="returns one value"):
        kiln.fuse(lambda a: 3.0)(x)
    with pytest.raises(kiln.InvalidArgument, match="0.5 is not an int32 value"):
        kiln.fuse(lambda a: a << 0.5)(i)
    with pytest.raises(kiln.InvalidArgument, match="dtype mismatch: float32 and int32"):
        kiln.fuse(lambda a, b: a + b)(x, i)
    with pytest.raises(kiln.InvalidArgument, match="where: dtype mismatch: a is float32 but b"):
        kiln.fuse(lambda a, b: kiln.ops.where(a > 0, a, b))(x, i)
    with pytest.raises(kiln.InvalidArgument, match="exp takes f32 or f16"):
        kiln.fuse(lambda a: kiln.ops.exp(a))(i)
    with pytest.raises(kiln.InvalidArgument,
                       match=r"sub: shapes \(3, 4\), \(5,\) do not broadcast"):
        kiln.fuse(lambda a, b: a - b)(x, np.ones(5, np.float32))
    with pytest.raises(kiln.InvalidArgument, match="float64"):
        kiln.fuse(lambda a: a.astype(np.float64))(x)
    with pytest.raises(kiln.InvalidArgument, match="argument 0 is int8; fused kernels take"):
        kiln.fuse(lambda a: a + 1)(kiln.tensor(np.ones(3, np.int8), device))
    kept = []
    kiln.fuse(lambda a: kept.append(a) or a + 1)(x)
    with pytest.raises(kiln.InvalidArgument, match="after its kiln.fuse call returned"):
        kept[0] * 2
    # numpy would make an array of one object of a traced value.
    for use in (lambda: np.asarray(kept[0]),
                lambda: kiln.fuse(lambda a: a + np.asarray(a))(x),
                lambda: kiln.fuse(lambda a: a + kiln.tensor(a))(x)):
        with pytest.raises(kiln.InvalidArgument, match="a value traced by kiln.fuse has no "
                           "elements to make a numpy array of"):
            use()
    # A bool value runs as int32 but is named bool, as unfused.
    with pytest.raises(kiln.InvalidArgument, match=r"add: dtype mismatch: float32 and bool \(cast "
                       r"one first; bool operands run as int32\)"):
        kiln.fuse(lambda a: a + (a > 0))(x)


def test_numbers_are_baked_into_the_trace(device):
    scale = [2.0]
    f = kiln.fuse(lambda x: x * scale[0])
    x = kiln.tensor(np.ones(3, np.float32), device)
    np.testing.assert_array_equal(f(x).numpy(), [2, 2, 2])
    scale[0] = 3.0
    np.testing.assert_array_equal(f(x).numpy(), [2, 2, 2])  # the same signature's trace
    np.testing.assert_array_equal(f(kiln.tensor(np.ones(4, np.float32), device)).numpy(),
                                  [3, 3, 3, 3])  # a new signature traces again


def test_deep_expressions_run_as_several_kernels(device, rng):
    # Thousands of operators in one expression, nesting deeper than one
    # kernel compiles: halves of it become kernels of their own (the same
    # halves build one program), the result exact (each step is exact in
    # float32 whether or not the driver fuses it into an fma).
    def deep(a, b):
        for k in range(2600):
            a = a * 0.5 + (b if k % 7 == 0 else 1.0)
        return a

    x = rng.standard_normal(100).astype(np.float32)
    y = rng.standard_normal(100).astype(np.float32)
    f = kiln.fuse(deep)
    before = set(device._cache)
    got = f(kiln.tensor(x, device), kiln.tensor(y, device))
    (program,) = [device._cache[k] for k in set(device._cache) - before]
    assert len(program.wgsl) >= 2  # kernels run in order
    np.testing.assert_array_equal(got.numpy(), deep(x, y))
    again = f(kiln.tensor(y, device), kiln.tensor(x, device))
    assert set(device._cache) - before == {k for k in device._cache if device._cache[k] is
                                           program}  # planned and built once
    np.testing.assert_array_equal(again.numpy(), deep(y, x))
    # A chain is one kernel, and refuses what nests too deep.
    t = kiln.tensor(x, device)
    with pytest.raises(kiln.InvalidArgument, match=r"of the chain nest more than \d+ levels"):
        kiln.ops.elementwise_chain(t, [("mul", 0.5), ("add", 1.0)] * 5000)
    np.testing.assert_array_equal(kiln.ops.elementwise_chain(t, ["neg"] * 300).numpy(), x)


def test_expressions_reading_more_tensors_than_a_kernel_binds_are_split(device, rng):
    # More arguments than the device binds storage buffers per kernel: the
    # expression runs as several kernels, each within the limit, the values
    # computed apart kept as tensors; broadcast shapes, a bool made early and
    # used last, int32 arithmetic alongside.
    limit = device.limits["max_storage_buffers_per_shader_stage"]
    n = limit + 13
    shapes = [(4, 7), (7,), (1, 7), (4, 1), ()]
    xs = [rng.standard_normal(shapes[k % len(shapes)]).astype(np.float32) for k in range(n)]
    ints = rng.integers(-100, 100, (4, 7)).astype(np.int32)

    def body(where, i, *a):
        keep = a[0] > a[1]
        total = a[2]
        for k in range(3, len(a)):
            total = total + a[k] * (k % 3) if k % 2 else total - a[k]
        return where(keep, total, (i * 3 + 1).astype("float32"))

    fused = kiln.fuse(lambda *a: body(kiln.ops.where, *a))
    before = set(device._cache)
    got = fused(kiln.tensor(ints, device), *[kiln.tensor(x, device) for x in xs])
    (program,) = [device._cache[k] for k in set(device._cache) - before]
    kernels = len(program.wgsl)
    assert kernels >= 2 and kernels >= (n + 1) / (limit - 1)
    # Each kernel binds at most the device's storage buffers.
    for wgsl in program.wgsl:
        assert wgsl.count("var<storage") <= limit
    assert [name for name, _, _ in program.inputs] == [f"X{k}" for k in range(n + 1)]
    want = body(np.where, ints, *[x.astype(np.float64) for x in xs])
    assert got.shape == (4, 7) and got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-4)
    again = fused(kiln.tensor(ints, device), *[kiln.tensor(x, device) for x in xs])
    assert len(set(device._cache) - before) == 1  # traced and built once
    np.testing.assert_array_equal(again.numpy(), got.numpy())


def test_bool_numbers_keep_bools_bool(device):
    # numpy: bool & True is bool, where(c, bools, True) is bool.
    m = np.array([True, False, True])
    x = np.array([1.0, -1.0, -2.0], np.float32)
    got = kiln.fuse(lambda a: a & True)(kiln.tensor(m, device)).numpy()
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, m & True)
    got = kiln.fuse(lambda a: np.True_ ^ a)(kiln.tensor(m, device)).numpy()
    np.testing.assert_array_equal(got, np.True_ ^ m)
    got = kiln.fuse(lambda v, b: kiln.ops.where(v > 0, b, True))(
        kiln.tensor(x, device), kiln.tensor(m, device)).numpy()
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.where(x > 0, m, True))


def test_fused_functions_compose_and_take_positional_tensors(device):
    silu = kiln.fuse(lambda x: x * kiln.ops.sigmoid(x))
    f = kiln.fuse(lambda x, b: silu(x) + b)  # silu joins f's kernel
    x = np.linspace(-3, 3, 7).astype(np.float32)
    b = np.ones(7, np.float32)
    got = f(kiln.tensor(x, device), kiln.tensor(b, device)).numpy()
    np.testing.assert_allclose(got, x / (1 + np.exp(-x)) + 1, rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match="pass the tensors positionally"):
        kiln.fuse(lambda x, b: x + b)(kiln.tensor(x, device), b=kiln.tensor(b, device))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_random_expressions_match_numpy(device, rng, dtype):
    # Random graphs of binary operators, maxima, minima and where over
    # arguments of broadcasting shapes (some 0-d) against numpy: int32
    # exactly (it wraps alike), some graphs long enough to run as several
    # kernels; float32 closely, in short graphs (the device may fuse a
    # multiply and an add, and a long graph would amplify the difference).
    shapes = [(3, 4), (4,), (3, 1), (1, 4), (), (2, 3, 4), (1,)]
    binary = {"add": lambda a, b, m: a + b, "sub": lambda a, b, m: a - b,
              "mul": lambda a, b, m: a * b,
              "max": lambda a, b, m: (kiln.ops.maximum if m is kiln else np.maximum)(a, b),
              "min": lambda a, b, m: (kiln.ops.minimum if m is kiln else np.minimum)(a, b),
              "where": lambda a, b, m: (kiln.ops.where if m is kiln else np.where)(a > b, a, b)}
    names = sorted(binary)
    for trial in range(8):
        n = int(rng.integers(1, 9))
        args = [(rng.integers(-5, 5, shapes[k]) if dtype == "int32" else
                 rng.uniform(-2, 2, shapes[k])).astype(dtype)
                for k in rng.integers(0, len(shapes), n)]
        steps = [(names[int(rng.integers(len(names)))], int(rng.integers(n + s)),
                  int(rng.integers(n + s)))
                 for s in range(int(rng.integers(300, 700) if dtype == "int32" and trial % 2 else
                                    rng.integers(0, 30)))]

        def body(*xs, m):
            values = list(xs)
            for op, a, b in steps:
                values.append(binary[op](values[a], values[b], m))
            total = values[-1]
            for v in values[:-1]:
                total = total + v
            return total

        got = kiln.fuse(lambda *xs: body(*xs, m=kiln))(*[kiln.tensor(x, device) for x in args])
        with np.errstate(all="ignore"):
            want = np.asarray(body(*args, m=np))
        assert got.shape == want.shape and got.dtype == want.dtype, (trial, steps)
        if dtype == "int32":
            np.testing.assert_array_equal(got.numpy(), want, err_msg=f"trial {trial}")
        else:
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4, equal_nan=True,
                                       err_msg=f"trial {trial}")


def test_traced_values_take_what_tensors_take(device):
    # Operands that are not numbers are TypeErrors (and kiln.InvalidArgument)
    # as unfused; astype takes copy=; where of 0-d bools keeps shape ().
    x = kiln.tensor(np.array([1.0, 2.0], np.float32), device)
    for f in (lambda v: v + "a", lambda v: v + [1, 2], lambda v: v < None):
        with pytest.raises(TypeError):
            f(x)
        with pytest.raises(TypeError, match="kiln.fuse"):
            kiln.fuse(f)(x)
    np.testing.assert_array_equal(
        kiln.fuse(lambda v: v.astype("int32", copy=False))(x).numpy(), [1, 2])
    c, b0 = (kiln.tensor(np.array(v), device) for v in (True, False))
    for f, want in ((lambda c, b: kiln.ops.where(c, True, b), True),
                    (lambda c, b: kiln.ops.where(c, b, False), False)):
        eager, fused = f(c, b0), kiln.fuse(f)(c, b0)
        assert eager.shape == fused.shape == () and eager.dtype == fused.dtype == np.bool_
        assert bool(eager) is bool(fused) is want


def test_elementwise_chain_inside_a_fused_function(device, rng):
    # A chain inside kiln.fuse records its steps: the same results as unfused.
    x = rng.uniform(-3, 3, (7, 33)).astype(np.float32)
    x[0, :3] = [np.nan, -0.0, 0.0]
    b = rng.standard_normal(33).astype(np.float32)
    t, tb = kiln.tensor(x, device), kiln.tensor(b, device)
    for steps in (["relu"], [("relu",), ("add", 1.0), ("mul", 2.0, True)], [("sub", 1.0, True)],
                  [("fma", 2.0, -1.0), ("clamp", -1.0, 1.0)], [("gt", 0.5), ("where", 1.0, -1.0)],
                  ["exp", ("lt", 3.0)], [("cast", "int32"), ("mul", 3)]):
        eager = kiln.ops.elementwise_chain(t, steps)
        fused = kiln.fuse(lambda v, s=steps: kiln.ops.elementwise_chain(v, s))(t)
        assert (fused.dtype, fused.shape) == (eager.dtype, eager.shape)
        np.testing.assert_array_equal(fused.numpy(), eager.numpy())
    fused = kiln.fuse(lambda v, w: kiln.ops.elementwise_chain(v, [("add", w), "tanh"]))(t, tb)
    np.testing.assert_allclose(fused.numpy(), np.tanh(x + b), rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match="elementwise_chain: step 1: unknown .* 'foo'"):
        kiln.fuse(lambda v: kiln.ops.elementwise_chain(v, ["foo"]))(t)
