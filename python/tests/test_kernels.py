import re
import subprocess

import numpy as np
import pytest

import kiln
from kiln import te
from conftest import REPO, require_feature

VECTOR_ADD = (REPO / "examples" / "vector_add.kir").read_text()


def _poisoned(shape, dtype, device):
    a = np.full(shape, np.nan, dtype) if np.dtype(dtype).kind == "f" else \
        np.full(shape, 0x5A, dtype)
    return kiln.tensor(a, device)


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
def test_ir_kernel_by_position_and_name(device, rng, n):
    mod = kiln.compile(VECTOR_ADD, device)
    assert mod.functions == ["vector_add"]
    k = mod["vector_add"]
    assert [p[0] for p in k.params] == ["A", "B", "C", "n"]
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    c = _poisoned(n, np.float32, device)
    out = k(kiln.tensor(a, device), kiln.tensor(b, device), c, n)
    assert out is c
    np.testing.assert_array_equal(c.numpy(), a + b)
    c2 = _poisoned(n, np.float32, device)
    k(n=n, C=c2, B=kiln.tensor(b, device), A=kiln.tensor(a, device))
    np.testing.assert_array_equal(c2.numpy(), a + b)


def test_kernel_call_errors(device):
    k = kiln.compile(VECTOR_ADD, device)["vector_add"]
    a = kiln.tensor(np.ones(8, np.float32), device)
    c = kiln.empty(8, "float32", device)
    with pytest.raises(kiln.InvalidArgument, match="no parameter 'm'; its parameters are A, B, C, n"):
        k(a, a, c, m=8)
    with pytest.raises(kiln.InvalidArgument, match="missing argument for parameter n"):
        k(a, a, c)
    with pytest.raises(kiln.InvalidArgument, match="parameter n .* given twice"):
        k(a, a, c, 8, n=8)
    with pytest.raises(kiln.InvalidArgument, match="takes 4 arguments"):
        k(a, a, c, 8, 9)
    with pytest.raises(kiln.InvalidArgument, match="parameter B of kernel vector_add .*int32"):
        k(a, kiln.tensor(np.ones(8, np.int32), device), c, 8)
    with pytest.raises(kiln.InvalidArgument, match="parameter A .* needs 9 .* shape \\[8\\]"):
        k(a, a, c, 9)
    with pytest.raises(TypeError, match="parameter n .*i32 scalar; got float"):
        k(a, a, c, 8.0)
    with pytest.raises(kiln.InvalidArgument, match="out of its range"):
        k(a, a, c, 2**40)
    with pytest.raises(kiln.ArgumentTypeError, match="takes a kiln.Tensor; got ndarray"):
        k(np.ones(8, np.float32), a, c, 8)
    with pytest.raises(kiln.InvalidArgument, match="no function|functions"):
        kiln.compile(VECTOR_ADD, device)["vector_sub"]


def test_kernel_scalars_from_numpy(device, rng):
    k = kiln.compile((REPO / "examples" / "saxpy_vec4.kir").read_text(), device)["saxpy_vec4"]
    x, z = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
    tx, tz = kiln.tensor(x, device), kiln.tensor(z, device)
    # A numpy scalar (or 0-d array) counts as its value.
    for n, a in ((np.int32(256), np.float32(2.5)), (np.int64(256), np.float64(-1.0)),
                 (256, np.array(0.5, np.float32))):
        y = _poisoned(256, np.float32, device)
        k(tx, tz, y, n, a)
        np.testing.assert_allclose(y.numpy(), np.float32(a) * x + z, rtol=1e-6)
    y = kiln.empty(256, "float32", device)
    for n, a, bad in ((256, True, "a of kernel saxpy_vec4 is an f32 scalar; got bool"),
                      (256, np.bool_(True), "is an f32 scalar; got bool"),
                      (np.int32(256), np.ones(1, np.float32), "f32 scalar; got ndarray"),
                      (np.uint64(2**40), 1.0, "n of kernel saxpy_vec4 .* out of its range"),
                      (256, 2**2000, "is an f32 scalar; an integer of 2001 bits is out of its "
                                     "range")):
        with pytest.raises(kiln.InvalidArgument, match=bad):
            k(tx, tz, y, n, a)


# two(A, B, C, n): B = A + 1, C = A * 2 (the runtime's test reads it too).
TWO_OUTPUTS = (REPO / "tests" / "corpus" / "two_outputs.kir").read_text()



def test_one_tensor_for_two_written_parameters_is_refused(device, rng):
    two = kiln.compile(TWO_OUTPUTS, device)["two"]
    a = rng.standard_normal(10).astype(np.float32)
    x, out = kiln.tensor(a, device), _poisoned(10, np.float32, device)
    with pytest.raises(kiln.InvalidArgument, match="arguments 1 \\('B'\\) and 2 \\('C'\\) are "
                                                   "both written"):
        two(x, out, out, 10)
    # Nothing was recorded, and the device works on.
    b, c = _poisoned(10, np.float32, device), _poisoned(10, np.float32, device)
    two(x, b, c, 10)
    np.testing.assert_array_equal(b.numpy(), a + 1)
    np.testing.assert_array_equal(c.numpy(), a * 2)
    np.testing.assert_array_equal(out.numpy(), np.full(10, np.nan, np.float32))


def test_modules_take_bytes_and_names(device, tmp_path):
    m = kiln.compile(VECTOR_ADD.encode(), device)
    assert list(m) == ["vector_add"] and "vector_add" in m and "other" not in m and 0 not in m
    for bad in (lambda: m[0], lambda: kiln.compile(3, device),
                lambda: kiln.compile(VECTOR_ADD, "dawn"), lambda: kiln.load_module(3, device),
                lambda: kiln.load_module(tmp_path / "v.kmod", "dawn")):
        with pytest.raises(TypeError, match="a str|device must be a kiln.Device|os.PathLike"):
            bad()
    # An unknown name is a KeyError, as for a mapping, and a kiln.InvalidArgument.
    with pytest.raises(KeyError) as e:
        m["other"]
    assert isinstance(e.value, kiln.InvalidArgument) and isinstance(e.value, kiln.KernelNotFoundError)
    assert str(e.value) == "the module has no function 'other' (it has: vector_add)"


def test_kernel_f32_scalars_out_of_range_record_nothing(device):
    k = kiln.compile((REPO / "examples" / "saxpy_vec4.kir").read_text(), device)["saxpy_vec4"]
    x = kiln.tensor(np.ones(256, np.float32), device)
    y = kiln.tensor(np.full(256, 7, np.float32), device)
    for a in (2**1024, -2**1100, 1e300, -3.5e38):
        with pytest.raises(kiln.InvalidArgument, match="parameter a .*f32 scalar; .* out of its range"):
            k(x, x, y, 256, a)
    np.testing.assert_array_equal(y.numpy(), np.full(256, 7, np.float32))  # nothing ran
    k(x, x, y, 256, 2**20)  # an int an f32 holds exactly
    np.testing.assert_array_equal(y.numpy(), np.full(256, 2**20 + 1, np.float32))
    k(x, x, y, 256, float("inf"))  # infinities are f32 values
    assert np.isposinf(y.numpy()).all()


def test_kernel_on_empty_tensors_runs_nothing(device):
    k = kiln.compile(VECTOR_ADD, device)["vector_add"]
    e = kiln.empty((0,), "float32", device)
    c = kiln.empty((0,), "float32", device)
    assert k(e, e, c, 0) is c and c.numpy().shape == (0,)


def test_bad_ir_reports_line_and_column(device):
    bad = VECTOR_ADD.replace("C[i] = A[i] + B[i]", "C[i] = A[i] + Q[i]")
    with pytest.raises(kiln.CompileError, match=r"line 20, column 23: undefined name 'Q'"):
        kiln.compile(bad, device)
    with pytest.raises(kiln.CompileError, match=r"line 1, column \d+"):
        kiln.compile("module { fn (", device)
    # What lowering would refuse later is refused at its line.
    long_unroll = "module {\nfn f(A: buffer<f32>[300]) {\n  for i in unroll(0, 300) {\n    A[i] = 1.0\n  }\n}\n}\n"
    with pytest.raises(kiln.CompileError, match=r"line 3, column 3: .*extent 300, more than the limit of 256"):
        kiln.compile(long_unroll, device)
    # So is a loop the vectorizer refuses, though only lowering finds out.
    shared_lanes = ("module {\nfn f(A: buffer<f32>[64]) {\n  for i in threadIdx.x(0, 16) {\n"
                    "    for j in vectorize(0, 4) {\n      A[i * 4] = A[i * 4 + j] + 1.0\n    }\n"
                    "  }\n}\n}\n")
    with pytest.raises(kiln.CompileError, match=r"kernel 'f': .*line 4, column 5: cannot "
                       r"vectorize loop `j`: `A` is stored and loaded at different indices"):
        kiln.compile(shared_lanes, device)
    # A parameter of more elements than its extents' type counts (the index
    # is computed in it).
    big = ("module {\nfn f(A: buffer<f32>[65536, 32768]) {\n  for tx in threadIdx.x(0, 1) {\n"
           "    A[0, 0] = 1.0\n  }\n}\n}\n")
    with pytest.raises(kiln.CompileError, match=r"line 2, column 1: .*buffer 'A' has 2147483648 "
                       r"elements, more than its extents' type i32 counts \(2147483647\)"):
        kiln.compile(big, device)
    # And a constant index the code generator refuses names the loop around it.
    negative = ("module {\nfn f(A: buffer<f32>[n], n: i32) {\n  for j in serial(0, n) {\n"
                "    for u in unroll(0, 3) {\n      A[u - 2] = 1.0\n    }\n  }\n}\n}\n")
    with pytest.raises(kiln.CompileError, match=r"kernel 'f': buffer 'A' is indexed at -2 "
                       r"\(in the loop `j` at line 3, column 3\)"):
        kiln.compile(negative, device)


def test_kmod_files(device, rng, tmp_path):
    kiln_tool = REPO / "build" / "tools" / "kiln" / "kiln"
    if not kiln_tool.exists():
        pytest.skip(f"{kiln_tool} is not built")
    kmod = tmp_path / "v.kmod"
    subprocess.run([str(kiln_tool), "compile", str(REPO / "examples" / "vector_add.kir"), "-o",
                    str(kmod)], check=True)
    mod = kiln.load_module(str(kmod), device)
    assert list(kiln.load_module(kmod, device)) == ["vector_add"]  # (an os.PathLike)
    a, b = (rng.standard_normal(33).astype(np.float32) for _ in range(2))
    c = _poisoned(33, np.float32, device)
    mod["vector_add"](kiln.tensor(a, device), kiln.tensor(b, device), c, 33)
    np.testing.assert_array_equal(c.numpy(), a + b)
    with pytest.raises(kiln.Error, match="missing.kmod"):
        kiln.load_module(str(tmp_path / "missing.kmod"), device)
    # A path is the file system's bytes: given as bytes, cut at no NUL.
    assert list(kiln.load_module(bytes(kmod), device)) == ["vector_add"]
    with pytest.raises(ValueError, match="path cannot be a file name: 'utf-8' codec can't encode"):
        kiln.load_module("\ud800.kmod", device)
    with pytest.raises(ValueError, match="path holds a NUL character"):
        kiln.load_module(str(kmod) + "\x00junk", device)
    with pytest.raises(kiln.Error, match="cannot open"):
        kiln.load_module(str(tmp_path).encode() + b"/\xff.kmod", device)
    # Text UTF-8 cannot hold (a lone surrogate) is named, never a C++ error.
    for call, text in ((lambda: kiln.compile("module {\ud800}", device),
                        r"kiln.compile: ir_text is not valid text: it holds a lone surrogate "
                        r"\(U\+D800\) at index 8"),
                       (lambda: mod["vector\udc80"], "kiln.Module: the kernel's name is not valid"),
                       (lambda: mod["vector_add"](**{"\ud800": 1}),
                        "a keyword argument's name is not valid text"),
                       (lambda: kiln.Device(impl="\ud800"), "kiln.Device: impl is not valid text"),
                       (lambda: te.placeholder((4,), "float32", name="a\ud800"),
                        "te.placeholder: name is not valid text")):
        with pytest.raises(ValueError, match=text):
            call()
    assert "\ud800" not in mod
    (tmp_path / "junk.kmod").write_bytes(b"not a module")
    with pytest.raises(kiln.DataLoss):
        kiln.load_module(str(tmp_path / "junk.kmod"), device)


def test_bool_and_int8x4_kernels(device, rng):
    mod = kiln.compile((REPO / "tests" / "corpus" / "bool_compare.kir").read_text(), device)
    n, thr = 1001, 0.25
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    gt, near = (kiln.tensor(np.zeros(n, bool), device) for _ in range(2))
    count = kiln.empty((n + 127) // 128, "int32", device)
    mod["compare"](kiln.tensor(a, device), kiln.tensor(b, device), gt, near, count, n, thr)
    np.testing.assert_array_equal(gt.numpy(), a > b)
    np.testing.assert_array_equal(near.numpy(), (np.abs(a - b) <= np.float32(thr)) & (a != b))
    np.testing.assert_array_equal(count.numpy(),
                                  np.add.reduceat((a > b).astype(np.int32), np.arange(0, n, 128)))

    mod = kiln.compile((REPO / "tests" / "corpus" / "dot4i8_basic.kir").read_text(), device)
    n, bias = 100, -7
    a8 = rng.integers(-128, 128, (n, 4), dtype=np.int8)
    b8 = rng.integers(-128, 128, (n, 4), dtype=np.int8)
    w = rng.integers(-128, 128, n, dtype=np.int32)
    c, d = kiln.empty(n, "int32", device), kiln.empty(n, "int32", device)
    mod["dot4"](kiln.tensor(a8, device), kiln.tensor(b8, device), kiln.tensor(w, device), c, d,
                n, bias)
    want = (a8.astype(np.int32) * b8.astype(np.int32)).sum(1) + bias
    np.testing.assert_array_equal(c.numpy(), want)
    with pytest.raises(kiln.InvalidArgument, match="needs 400 int8"):
        mod["dot4"](kiln.tensor(a8[:99], device), kiln.tensor(b8, device),
                    kiln.tensor(w, device), c, d, n, bias)


def _matmul(M, N, K):
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], [k]), name="C")
    return A, B, C


def _check_matmul(s, tensors, mnk, device, rng):
    # Builds the schedule, runs it on fresh inputs into a poisoned C and
    # compares with numpy.
    A, B, C = tensors
    M, N, K = mnk
    kern = kiln.build(s, [C], [A, B], "mm", device)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = _poisoned((M, N), np.float32, device)
    kern(kiln.tensor(a, device), kiln.tensor(b, device), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mnk", [(1, 1, 1), (7, 33, 5), (33, 40, 17)], ids=str)
def test_te_matmul_scheduled(device, rng, mnk):
    M, N, K = mnk
    A, B, C = _matmul(M, N, K)
    s = te.create_schedule(C)
    i, j = s[C].axis
    io, ii = s[C].split(i, 4)
    jo, ji = s[C].split(j, 8)
    s[C].reorder(io, jo, ii, ji)
    s[C].bind(io, "blockIdx.y")
    s[C].bind(jo, "blockIdx.x")
    s[C].bind(ii, "threadIdx.y")
    s[C].bind(ji, "threadIdx.x")
    assert str(s).splitlines()[0] == "C.split(i, 4)"
    # A schedule is data: the same primitives make an equal schedule.
    again = te.create_schedule(C)
    assert again != s and again != str(s)
    i2, j2 = again[C].axis
    io2, ii2 = again[C].split(i2, 4)
    jo2, ji2 = again[C].split(j2, 8)
    again[C].reorder(io2, jo2, ii2, ji2)
    for axis, launch in ((io2, "blockIdx.y"), (jo2, "blockIdx.x"), (ii2, "threadIdx.y")):
        again[C].bind(axis, launch)
    assert again != s
    again[C].bind(ji2, "threadIdx.x")
    assert again == s
    # ... and the printed records applied again do too, as text or a list.
    for records in (str(s), s.primitives):
        replayed = te.create_schedule(C)
        replayed.apply(records)
        assert replayed == s and str(replayed) == str(s)
        _check_matmul(replayed, (A, B, C), (M, N, K), device, rng)
    _check_matmul(s, (A, B, C), (M, N, K), device, rng)


def test_te_schedule_apply_errors_leave_it_as_it_was():
    A, B, C = _matmul(7, 33, 5)
    s = te.create_schedule(C)
    with pytest.raises(kiln.InvalidArgument, match=r"te.Schedule.apply: line 2: split of stage "
                       r"'C': the stage has no axis 'q'"):
        s.apply("C.split(i, 4)\nC.split(q, 4)\n")
    assert str(s) == ""
    with pytest.raises(kiln.InvalidArgument, match=r"line 1: record `C.tile\(i, j, 2, 2\)`: a "
                       r"record is STAGE.PRIMITIVE\(ARGUMENTS\)"):
        s.apply(["C.tile(i, j, 2, 2)"])
    with pytest.raises(kiln.InvalidArgument, match="a record of the list holds a line break"):
        s.apply(["C.split(i, 4)\nC.split(j, 4)"])
    for bad, name in ((3, "int"), (None, "None"), ([b"C.split(i, 4)"], "bytes")):
        with pytest.raises(TypeError, match=f"apply: records must be a str or a list of str, "
                           f".*{name}"):
            s.apply(bad)
    assert str(s) == ""
    s.apply("")
    s.apply([])
    assert str(s) == ""


@pytest.mark.parametrize("mnk", [(16, 32, 8), (7, 33, 5)], ids=str)
def test_te_register_tile_with_vector_accumulators(device, rng, mnk):
    # Each thread's 2 x 8 elements of C as two groups of 4 columns 16 apart
    # (a strided local region), accumulated in place with k outside, four
    # columns per vector update; at ragged sizes the lanes run unrolled.
    M, N, K = mnk
    A, B, C = _matmul(M, N, K)
    s = te.create_schedule(C)
    Cl = s.cache_write(C, "local")
    c = s[C]
    i, j = c.axis
    io, ii = c.split(i, 2)
    jq, jl = c.split(j, 4)
    jo, jr = c.split(jq, 8)
    jg, jt = c.split(jr, 4)
    c.reorder(io, jo, jt, ii, jg, jl)
    c.bind(io, "blockIdx.y")
    c.bind(jo, "blockIdx.x")
    c.bind(jt, "threadIdx.x")
    acc = s[Cl]
    acc.compute_at(c, jt)
    ci, cj = acc.axis
    acc.reorder(acc.reduce_axis[0], ci, cj)
    cjo, cjl = acc.split(cj, 4)
    acc.vectorize(cjl)
    text = te.lower(s, [C], [A, B], "mm")
    assert "C_local_buf: f32[2, 8] local" in text, text
    whole = M % 2 == 0 and N % 32 == 0
    assert ("in vectorize(0, 4)" in text) == whole, text
    _check_matmul(s, (A, B, C), (M, N, K), device, rng)


@pytest.mark.parametrize("n,factor,div", [(4, 4, 2), (7, 4, 2), (9, 8, 4), (33, 6, 3),
                                           (5, 1, 2)], ids=str)
def test_te_compute_at_read_through_floor_division(device, rng, n, factor, div):
    # P[i // div] under a split of i by a multiple of div: the region P
    # computes per outer iteration is factor / div elements, its ends
    # divided term by term (the last one partial where n * div is not a
    # multiple of factor).
    m = n * div - 1
    A = te.placeholder((n,), "float32", name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="P")
    C = te.compute((m,), lambda i: P[i // div] - 0.5, name="C")
    s = te.create_schedule(C)
    io, ii = s[C].split(s[C].axis[0], factor)
    s[P].compute_at(s[C], io)
    k = kiln.build(s, [C], [A], "up", device=device)
    a = rng.standard_normal(n).astype(np.float32)
    c = kiln.tensor(np.full(m, np.nan, np.float32), device)
    k(kiln.tensor(a, device), c)
    want = (a * 2.0 + 1.0)[np.arange(m) // div] - 0.5
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-6, atol=1e-6)  # a fused a * 2 + 1
    if factor % div:
        return
    # Split by factor + 1, which div does not divide: the region's size
    # varies (2 or 3 elements for 5 outputs halved); it is allocated at its
    # largest, bounded through the quotients.
    s2 = te.create_schedule(C)
    io2, _ = s2[C].split(s2[C].axis[0], factor + 1)
    s2[P].compute_at(s2[C], io2)
    size = _buffer_size(te.lower(s2, [C], [A], "up"), "P", "local")
    assert size == min(factor // div + 1, n), size  # (factor + 1 - 1) // div + 1 at most
    k2 = kiln.build(s2, [C], [A], "up", device=device)
    c2 = kiln.tensor(np.full(m, np.nan, np.float32), device)
    k2(kiln.tensor(a, device), c2)
    np.testing.assert_allclose(c2.numpy(), want, rtol=1e-6, atol=1e-6)


def _buffer_size(text, stage, scope):
    """The element count of stage's f32 buffer in lowered IR text."""
    return int(re.search(rf"{stage}_buf: f32\[(\d+)\] {scope}", text).group(1))


def _clamped_stencil(n, scope, factor):
    """A three-point stencil that repeats the edge elements (indices clamped
    with min/max), P computed at C's outer loop in `scope`: (A, C, schedule,
    P's buffer size in the lowered kernel)."""
    A = te.placeholder((n,), "float32", name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="P")
    C = te.compute((n,), lambda i: P[te.maximum(i - 1, 0)] + P[i] * 3.0
                   + P[te.minimum(i + 1, n - 1)], name="C")
    s = te.create_schedule(C)
    io, ii = s[C].split(s[C].axis[0], factor)
    s[C].bind(io, "blockIdx.x")
    s[P].compute_at(s[C], io)
    s[P].set_scope(scope)
    if scope == "shared":
        s[C].bind(ii, "threadIdx.x")
        po, pi = s[P].split(s[P].axis[0], factor)
        s[P].bind(pi, "threadIdx.x")
    return A, C, s, _buffer_size(te.lower(s, [C], [A], "blur"), "P", scope)


def _check_clamped_stencil(kernel, device, rng, n, *sizes):
    a = rng.standard_normal(n).astype(np.float32)
    a[-1] = np.nan  # read through the clamp at the end: the last outputs are NaN
    c = kiln.tensor(np.full(n, 7e30, np.float32), device)  # poisoned, not NaN
    kernel(kiln.tensor(a, device), c, *sizes)
    p = a.astype(np.float64) * 2.0 + 1.0
    idx = np.arange(n)
    want = p[np.maximum(idx - 1, 0)] + p * 3.0 + p[np.minimum(idx + 1, n - 1)]
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scope", ["local", "shared"])
@pytest.mark.parametrize("n,factor", [(1000, 4), (1000, 64), (5, 4), (3, 8), (1, 2)], ids=str)
def test_te_compute_at_a_clamped_halo(device, rng, scope, n, factor):
    # The region P computes per outer iteration moves by an amount that
    # varies near the ends, and is allocated at its largest, factor + 2
    # elements (fewer where the outer loop's few iterations bound it
    # closer), the positions past the tensor guarded.
    A, C, s, size = _clamped_stencil(n, scope, factor)
    assert size == factor + 2 or (n < factor + 2 and size <= factor + 2)
    _check_clamped_stencil(kiln.build(s, [C], [A], "blur", device=device), device, rng, n)


def test_te_compute_at_wide_and_chained_clamped_halos(device, rng):
    # A 25-tap clamped filter (the union of its reads stays a few clamps),
    # two clamped stages computed at the same loop, and reflect padding
    # written through a max under a subtraction.
    n, taps = 1000, 12
    mx, mn = te.maximum, te.minimum
    A = te.placeholder((n,), "float32", name="A")
    Q = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="Q")
    P = te.compute((n,), lambda i: Q[mx(i - 1, 0)] - Q[mn(i + 1, n - 1)], name="P")

    def reflect(x):
        return (n - 1) - mx((n - 1) - x, x - (n - 1))

    def body(i):
        e = P[i] + P[reflect(i + 2)] * 0.5
        for t in range(1, taps + 1):
            e = e + P[mx(i - t, 0)] + P[mn(i + t, n - 1)]
        return e

    C = te.compute((n,), body, name="C")
    s = te.create_schedule(C)
    io, _ = s[C].split(s[C].axis[0], 32)
    s[C].bind(io, "blockIdx.x")
    for stage in (P, Q):
        s[stage].compute_at(s[C], io)
        s[stage].set_scope("local")
    text = te.lower(s, [C], [A], "wide")
    # P's reads span 56 elements per 32 outputs, Q's 58: the bound may be
    # looser (reflect's two arms), never near the tensor's 1000.
    p_size, q_size = _buffer_size(text, "P", "local"), _buffer_size(text, "Q", "local")
    assert 56 <= p_size <= 80 and 58 <= q_size <= 80, text
    k = kiln.build(s, [C], [A], "wide", device=device)
    a = rng.standard_normal(n).astype(np.float32)
    c = _poisoned(n, np.float32, device)
    k(kiln.tensor(a, device), c)
    idx = np.arange(n)
    q = a.astype(np.float64) * 2.0 + 1.0
    p = q[np.maximum(idx - 1, 0)] - q[np.minimum(idx + 1, n - 1)]
    want = p + p[(n - 1) - np.abs((n - 1) - (idx + 2))] * 0.5
    for t in range(1, taps + 1):
        want = want + p[np.maximum(idx - t, 0)] + p[np.minimum(idx + t, n - 1)]
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("scope", ["local", "shared"])
@pytest.mark.parametrize("factor", [1, 3, 4, 64])
def test_te_compute_at_a_halo_clamped_to_a_symbolic_size(device, rng, scope, factor):
    # The clamped stencil with a symbolic n: the region's bound relates the
    # clamp n - 1 to the outer loop's extent (n + factor - 1) / factor.
    # One kernel serves every n, the tiny ones included.
    A, C, s, size = _clamped_stencil(te.size_var("n"), scope, factor)
    assert size == factor + 2
    k = kiln.build(s, [C], [A], "blur", device=device)
    for n in (1, 2, 3, 5, factor + 1, 1000, 4097):
        _check_clamped_stencil(k, device, rng, n, n)


def test_te_compute_at_a_halved_index_clamped_to_a_symbolic_size(device, rng):
    # P[i // 2] and P[min(i // 2 + 3, n - 1)] under a split by 4: the bound
    # meets 2 ((n + 3) / 4), whose coefficient 4 does not divide.
    n = te.size_var("n")
    A = te.placeholder((n,), "float32", name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="P")
    C = te.compute((n,), lambda i: P[i // 2] + P[te.minimum(i // 2 + 3, n - 1)], name="C")
    s = te.create_schedule(C)
    io, _ = s[C].split(s[C].axis[0], 4)
    s[C].bind(io, "blockIdx.x")
    s[P].compute_at(s[C], io)
    s[P].set_scope("local")
    assert _buffer_size(te.lower(s, [C], [A], "half"), "P", "local") == 5
    k = kiln.build(s, [C], [A], "half", device=device)
    for length in (1, 2, 3, 7, 8, 1000):
        a = rng.standard_normal(length).astype(np.float32)
        c = _poisoned(length, np.float32, device)
        k(kiln.tensor(a, device), c, length)
        p = a.astype(np.float64) * 2.0 + 1.0
        idx = np.arange(length)
        want = p[idx // 2] + p[np.minimum(idx // 2 + 3, length - 1)]
        np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-5)


def test_te_compute_at_symbolic_reflect_and_chained_halos(device, rng):
    # Reflect padding and two clamped stages at one loop, with a symbolic
    # size and a tiled (two-level split) consumer.
    n = te.size_var("n")
    mx, mn = te.maximum, te.minimum
    A = te.placeholder((n,), "float32", name="A")
    Q = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="Q")
    P = te.compute((n,), lambda i: Q[mx(i - 1, 0)] - Q[mn(i + 2, n - 1)], name="P")

    def reflect(x):
        return (n - 1) - mx((n - 1) - x, x - (n - 1))

    C = te.compute((n,), lambda i: P[i] + P[reflect(i + 3)] * 0.5 + P[mx(i - 4, 0)], name="C")
    s = te.create_schedule(C)
    io, ii = s[C].split(s[C].axis[0], 32)
    iio, _ = s[C].split(ii, 8)
    s[C].bind(io, "blockIdx.x")
    for stage in (P, Q):
        s[stage].compute_at(s[C], iio)
        s[stage].set_scope("local")
    text = te.lower(s, [C], [A], "reflect")
    # P's reads span 8 + 3 + 4 elements per 8 outputs where the outputs are
    # in the tensor; the bound is looser (the middle loop runs past n,
    # where reflect's arms part), but a constant far below the tensor's.
    p_size, q_size = _buffer_size(text, "P", "local"), _buffer_size(text, "Q", "local")
    assert 15 <= p_size <= 96 and p_size + 3 <= q_size <= 160, text
    k = kiln.build(s, [C], [A], "reflect", device=device)
    for length in (4, 5, 9, 33, 1000):  # reflect(i + 3) stays in [0, n) from n = 4
        a = rng.standard_normal(length).astype(np.float32)
        c = _poisoned(length, np.float32, device)
        k(kiln.tensor(a, device), c, length)
        idx = np.arange(length)
        q = a.astype(np.float64) * 2.0 + 1.0
        p = q[np.maximum(idx - 1, 0)] - q[np.minimum(idx + 2, length - 1)]
        r = (length - 1) - np.abs((length - 1) - (idx + 3))
        want = p + p[r] * 0.5 + p[np.maximum(idx - 4, 0)]
        np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)


def test_te_compute_at_a_halo_clamped_to_an_unrelated_size():
    # Clamped to m, which nothing relates to the loop over n: no bound.
    n, m = te.size_var("n"), te.size_var("m")
    A = te.placeholder((m,), "float32", name="A")
    P = te.compute((m,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n,), lambda i: P[te.minimum(i + 1, m - 1)] + P[te.maximum(i - 1, 0)],
                   name="C")
    s = te.create_schedule(C)
    io, _ = s[C].split(s[C].axis[0], 4)
    s[P].compute_at(s[C], io)
    with pytest.raises(kiln.InvalidArgument, match=r"stage 'P' computed at 'C', loop 'i_outer'"
                       r".*whose size is not a constant, nor bounded by one.*clamp indices to "
                       r"constants or to sizes of the kernel's output"):
        te.lower(s, [C], [A], "clamp")


@pytest.mark.parametrize("n,factor", [(1000, 4), (10, 4), (9, 3), (7, 2), (12, 8)], ids=str)
def test_te_vectorize_a_computed_at_stage_by_its_region(device, rng, n, factor):
    # P's axis spans n elements, but the region computed per iteration of
    # C's outer loop spans `factor`: that is what vectorize needs to be 2-4.
    A = te.placeholder((n,), "float32", name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="P")
    C = te.compute((n,), lambda i: P[i] - 0.5, name="C")
    s = te.create_schedule(C)
    io, _ = s[C].split(s[C].axis[0], factor)
    s[P].compute_at(s[C], io)
    s[P].vectorize(s[P].axis[0])
    if factor > 4:
        with pytest.raises(kiln.InvalidArgument, match=r"stage 'P' vectorizes axis 'i', whose "
                           r"extent is 8 where the stage is computed \(at 'C', loop 'i_outer'\); "
                           r"a vectorized axis needs extent 2, 3 or 4"):
            te.lower(s, [C], [A], "up")
        return
    text = te.lower(s, [C], [A], "up")
    assert (f"in vectorize(0, {factor})" in text) == (n % factor == 0), text
    k = kiln.build(s, [C], [A], "up", device=device)
    a = rng.standard_normal(n).astype(np.float32)
    c = kiln.tensor(np.full(n, np.nan, np.float32), device)
    k(kiln.tensor(a, device), c)
    np.testing.assert_allclose(c.numpy(), a * 2.0 + 1.0 - 0.5, rtol=1e-6, atol=1e-6)
    # Vectorized before it is computed at a loop, the axis's whole extent
    # is what counts.
    s2 = te.create_schedule(C)
    if n > 4:
        with pytest.raises(kiln.InvalidArgument, match=f"has extent {n}; a vectorized axis "
                           "needs extent 2, 3 or 4"):
            s2[P].vectorize(s2[P].axis[0])


def test_te_symbolic_size_fuse_unroll_inline(device, rng):
    n = te.size_var("n")
    X = te.placeholder((n, 4), "float32", name="X")
    T = te.compute((n, 4), lambda i, j: te.exp(X[i, j]) + 1, name="T")
    Y = te.compute((n, 4), lambda i, j: te.select(T[i, j] > 2.0, T[i, j] * 2, -T[i, j]),
                   name="Y")
    s = te.create_schedule(Y)
    s[T].compute_inline()
    i, j = s[Y].axis
    s[Y].unroll(j)
    io, ii = s[Y].split(i, 32)
    s[Y].bind(io, "blockIdx.x")
    s[Y].bind(ii, "threadIdx.x")
    assert "T.compute_inline()" in str(s) and "Y.unroll(j)" in str(s)
    assert "fn inl" in te.lower(s, [Y], [X], "inl")
    kern = kiln.build(s, [Y], [X], "inl", device)
    assert [p[0] for p in kern.params] == ["X", "Y", "n"]
    for rows in (1, 7, 1000):
        x = rng.standard_normal((rows, 4)).astype(np.float32)
        y = _poisoned((rows, 4), np.float32, device)
        kern(kiln.tensor(x, device), y, rows)
        t = np.exp(x) + 1
        np.testing.assert_allclose(y.numpy(), np.where(t > 2, t * 2, -t), rtol=1e-5)

    Z = te.compute((n * 4,), lambda i: X[i // 4, i % 4] * 3.0, name="Z")
    s = te.create_schedule(Z)
    fused_axis = s[Z].axis[0]
    o, inner = s[Z].split(fused_axis, 64)
    f = s[Z].fuse(o, inner)
    o, inner = s[Z].split(f, 64)
    s[Z].bind(o, "blockIdx.x")
    s[Z].bind(inner, "threadIdx.x")
    kern = kiln.build(s, [Z], [X], "flat", device)
    x = rng.standard_normal((33, 4)).astype(np.float32)
    z = _poisoned(132, np.float32, device)
    kern(kiln.tensor(x, device), z, 33)
    np.testing.assert_allclose(z.numpy(), x.ravel() * 3, rtol=1e-6)


def test_te_reducers(device, rng):
    X = te.placeholder((7, 33), "float32", name="X")
    k = te.reduce_axis(33, "k")
    outs = {
        "sum": te.compute((7,), lambda i: te.sum(X[i, k], k), name="S"),
        "max": te.compute((7,), lambda i: te.max(X[i, k], axis=[k]), name="Mx"),  # TVM's keyword
        "min": te.compute((7,), lambda i: te.min(X[i, k], axes=k), name="Mn"),
        "prod": te.compute((7,), lambda i: te.prod(X[i, k], [k]), name="P"),
        "device_max": te.compute((7,), lambda i: te.device_max(X[i, k], k), name="Dx"),
        "device_min": te.compute((7,), lambda i: te.device_min(X[i, k], k), name="Dn"),
    }
    for bad, why in ((lambda i: te.sum(X[i, k]), "neither was given"),
                     (lambda i: te.sum(X[i, k], k, axis=k), "both were given")):
        with pytest.raises(kiln.InvalidArgument,
                           match=f"takes the reduction axes once: axes= or axis= \\({why}\\)"):
            te.compute((7,), bad, name="B")
    x = rng.uniform(0.9, 1.1, (7, 33)).astype(np.float32)
    xt = kiln.tensor(x, device)
    for name, T in outs.items():
        s = te.create_schedule(T)
        s[T].bind(s[T].axis[0], "threadIdx.x")
        kern = kiln.build(s, [T], [X], "r_" + name, device)
        y = _poisoned(7, np.float32, device)
        kern(xt, y)
        want = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod,
                "device_max": np.max, "device_min": np.min}[name](x, axis=1)
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)


def test_te_misplaced_arguments_are_type_errors():
    # A list where axes belong, a string among outputs, a float factor, a
    # name for a tensor: TypeErrors at once, naming the function and the
    # argument (a 1-D tensor used to be iterated forever, T[i] reading any i).
    A = te.placeholder((8,), "float32", name="A")
    C = te.compute((8,), lambda i: A[i] * 2.0, name="C")
    s = te.create_schedule(C)
    with pytest.raises(TypeError, match="te.Tensor 'C' is not iterable"):
        list(C)
    with pytest.raises(TypeError, match="reorder: argument 2 is a str, not an axis"):
        s[C].reorder(s[C].axis[0], "i")
    with pytest.raises(TypeError, match="reorder: argument 1 is a list"):
        s[C].reorder([s[C].axis[0]])
    with pytest.raises(TypeError, match=r"create_schedule: outputs must be te.Tensors \(a list "
                       r"of them\), not str"):
        te.create_schedule([C, "x"])
    with pytest.raises(TypeError, match="te.lower: inputs must be a te.Tensor or a list of them, "
                       "not int"):
        te.lower(s, C, 3)
    with pytest.raises(TypeError, match="kiln.build: outputs must be a te.Tensor or a list of "
                       "them, not str"):
        kiln.build(s, "C", [A])
    with pytest.raises(TypeError, match=r"split: factor must be an int, not float \(2.0\)"):
        s[C].split(s[C].axis[0], 2.0)
    with pytest.raises(TypeError, match=r"split: factor must be an int, not bool \(True\)"):
        s[C].split(s[C].axis[0], True)
    with pytest.raises(TypeError, match="split: axis must be an axis, not int"):
        s[C].split(0, 2)
    with pytest.raises(TypeError, match="tile: y_factor must be an int, not float"):
        s[C].tile(s[C].axis[0], s[C].axis[0], 2, 2.5)
    with pytest.raises(TypeError, match="bind: thread must be a str"):
        s[C].bind(s[C].axis[0], 0)
    with pytest.raises(TypeError, match=r"compute_at: consumer must be a stage \(s\[C\]\), "
                       "not te.Tensor"):
        s[C].compute_at(C, s[C].axis[0])
    with pytest.raises(TypeError, match=r"te.Schedule\[\]: the index must be a te.Tensor "
                       r"\(s\[C\]\), not str"):
        s["C"]
    with pytest.raises(TypeError, match=r"te.cast takes the dtype first: te.cast\('float16', x\)"):
        te.cast(A[0], "float16")
    with pytest.raises(TypeError, match="te.placeholder: dtype must be a str"):
        te.placeholder((8,), 5)
    with pytest.raises(TypeError, match="storage_align: offset must be an int, not float"):
        s[C].storage_align(s[C].axis[0], 8, 1.0)
    assert str(s) == ""
    # One tensor where a list belongs is that list.
    assert te.lower(s, C, A) == te.lower(s, [C], [A])
    # Another program's tensor of the same name is not this schedule's stage.
    k = te.reduce_axis(8, "k")
    X = te.placeholder((8, 8), "float32", name="A")
    D = te.compute((8,), lambda i: te.sum(X[i, k] * X[i, k], k), name="C")
    with pytest.raises(kiln.InvalidArgument, match="tensor 'C' is not a stage of this schedule: "
                       "its stage of that name computes another tensor"):
        s[D].fused_multiply_add()
    with pytest.raises(kiln.InvalidArgument, match="tensor 'A' is not a compute stage"):
        s[A]
    with pytest.raises(kiln.InvalidArgument, match="cache_read: tensor 'A' is not one of this "
                       "schedule's tensors"):
        s.cache_read(X, "shared", [C])
    with pytest.raises(kiln.InvalidArgument, match="cache_read of 'A': tensor 'C' is not one of"):
        s.cache_read(A, "shared", [D])
    with pytest.raises(kiln.InvalidArgument, match="cache_write: tensor 'C' is not one of"):
        s.cache_write(D, "local")
    assert str(s) == ""
    for call, message in [
            (lambda: s[C].unroll(3), "unroll: axis must be an axis, not int"),
            (lambda: s[C].vectorize("i"), "vectorize: axis must be an axis, not str"),
            (lambda: s[C].fuse(s[C].axis[0], None), "fuse: inner must be an axis, not NoneType"),
            (lambda: s[C].set_scope(3), r"set_scope: scope must be a str \('shared' or 'local'\)"),
            (lambda: s.cache_write(C, None), "cache_write: scope must be a str"),
            (lambda: s.cache_read(3, "shared", C), "cache_read: tensor must be a te.Tensor, not int"),
            (lambda: s.rfactor(C, 3), "rfactor: axis must be an axis, not int"),
            (lambda: s[C].double_buffer("x"), r"double_buffer: branch_free must be a bool, not "
                                             r"str \('x'\)"),
            (lambda: s[C].copy_ahead(through_registers=1), "copy_ahead: through_registers must be "
                                                           "a bool, not int"),
            (lambda: s[C].copy_ahead(True, last=3), "copy_ahead: last must be a str"),
            (lambda: te.compute((8,), None), "te.compute: fcompute must be a function of the "
                                             "indices"),
            (lambda: te.compute((8,), lambda i: A[i], name=3), "te.compute: name must be a str"),
            (lambda: te.size_var(3), "te.size_var: name must be a str, not int")]:
        with pytest.raises(TypeError, match=message):
            call()
    assert str(s) == ""
    s[C].split(s[C].axis[0], np.int64(4))  # a numpy integer is an int
    assert "C.split(i, 4)" in str(s)


def test_te_none_in_any_argument_is_a_named_type_error():
    # None in every position of every TE function and schedule primitive:
    # kiln's own error naming the function (never the binding layer's list
    # of C++ signatures), and the schedule left as it was.
    A = te.placeholder((8,), "float32", name="A")
    k = te.reduce_axis(8, "k")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="C")
    s = te.create_schedule([B, C])
    i = s[B].axis[0]
    calls = {
        "placeholder": (te.placeholder, [(8,), "float32", "X"]),
        "compute": (te.compute, [(8,), lambda i: A[i], "T"]),
        "reduce_axis": (te.reduce_axis, [4, "r"]),
        "sum": (lambda e, a: te.sum(e, axis=a), [A[k], k]),
        "reduce": (te.reduce, ["r", lambda a, b: [a[0] + b[0]], [0.0], [A[k]], [k]]),
        "maximum": (te.maximum, [A[0], 1.0]),
        "minimum": (te.minimum, [A[0], 1.0]),
        "select": (te.select, [A[0] > 0.0, A[0], 1.0]),
        "cast": (te.cast, ["int32", A[0]]),
        "const": (te.const, [1.0, "float32"]),
        "exp": (te.exp, [A[0]]),
        "pow": (te.pow, [A[0], 2.0]),
        "A[]": (lambda x: A[x], [0]),
        "A()": (lambda x: A(x), [0]),
        "s[]": (lambda x: s[x], [B]),
        "split": (s[B].split, [i, 4]),
        "fuse": (s[B].fuse, [i, i]),
        "tile": (s[B].tile, [i, i, 2, 2]),
        "bind": (s[B].bind, [i, "threadIdx.x"]),
        "unroll": (s[B].unroll, [i]),
        "vectorize": (s[B].vectorize, [i]),
        "compute_at": (s[B].compute_at, [s[C], i]),
        "set_scope": (s[B].set_scope, ["shared"]),
        "storage_align": (s[B].storage_align, [i, 4, 1]),
        "double_buffer": (s[B].double_buffer, [False]),
        "copy_ahead": (s[B].copy_ahead, [False, False]),
        "cache_read": (s.cache_read, [A, "shared", [B]]),
        "cache_write": (s.cache_write, [B, "local"]),
        "rfactor": (s.rfactor, [C, k]),
        "create_schedule": (te.create_schedule, [[B]]),
        "lower": (te.lower, [s, [B], [A], "k"]),
        "lower_kernels": (te.lower_kernels, [s, [B], [A], "k"]),
        "build": (kiln.build, [s, [B], [A], "k"]),
        "build_kernels": (kiln.build_kernels, [s, [B], [A], "k"]),
    }
    for name, (fn, args) in calls.items():
        for pos in range(len(args)):
            with_none = list(args)
            with_none[pos] = None
            with pytest.raises((TypeError, kiln.Error)) as caught:
                fn(*with_none)
            message = str(caught.value)
            assert "incompatible function arguments" not in message, (name, pos, message)
    assert str(s) == ""
    with pytest.raises(TypeError, match="te.lower: schedule must be a te.Schedule, not None"):
        te.lower(None, B, A)
    with pytest.raises(TypeError, match="te.placeholder: the shape must be a sequence of ints "
                       "and size vars, not NoneType"):
        te.placeholder(None)
    with pytest.raises(TypeError, match="te.reduce 'r': combine must be a function"):
        te.reduce("r", 3, [0.0], [A[k]], [k])
    with pytest.raises(TypeError, match="te.Tensor 'A': an index must be a kiln.te expression, "
                       "axis or number; got NoneType"):
        A[None]
    with pytest.raises(TypeError, match="te.maximum: b must be"):
        te.maximum(A[0], None)
    with pytest.raises(TypeError, match="te.pow: argument 2 must be"):
        te.pow(A[0], "2")
    with pytest.raises(TypeError, match="operand must be a kiln.te expression, axis or number; "
                       "got NoneType"):
        A[0] + None  # noqa: B018
    # Integers past 64 bits next to a float: the float they round to, where
    # the type holds it.
    assert "1.2676506e+30" in te.lower(te.create_schedule(D := te.compute(
        (8,), lambda i: A[i] + 2**100, name="D")), D, A)
    assert str(te.const(2**64, "float32")) == str(te.const(float(2**64), "float32"))
    with pytest.raises(kiln.InvalidArgument, match="beyond the largest finite f32"):
        te.const(2**200, "float32")
    with pytest.raises(kiln.InvalidArgument, match="too large for a f32 constant"):
        A[0] * 2**1100  # noqa: B018
    # Shapes: an int, a size var or a numpy integer is one dimension; any
    # sequence of them (a range, a numpy array) is the shape.
    n = te.size_var("n")
    assert len(te.placeholder(n).shape) == 1
    assert len(te.placeholder(np.int64(3)).shape) == 1
    assert [str(d) for d in te.placeholder(np.array([2, 3])).shape] == ["2", "3"]
    assert [str(d) for d in te.placeholder(range(2, 4)).shape] == ["2", "3"]


def test_te_single_tensors_where_lists_belong():
    # A reader, output or input given alone is the list of that one (a
    # reader as its tensor or its stage); the records are the same.
    records = []
    for readers in ("tensor", "stage", "list"):
        A = te.placeholder((8,), "float32", name="A")
        C = te.compute((8,), lambda i: A[i] * 2.0, name="C")
        s = te.create_schedule(C)
        As = s.cache_read(A, "local", {"tensor": C, "stage": s[C], "list": [C]}[readers])
        s[As].compute_at(s[C], s[C].axis[0])
        records.append(str(s))
        assert "A_local" in te.lower(s, C, A)
    assert records[0] == records[1] == records[2], records
    # Stages inside a list of readers too.
    A = te.placeholder((8,), "float32", name="A")
    C = te.compute((8,), lambda i: A[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: A[i] + C[i], name="D")
    s = te.create_schedule(D)
    s.cache_read(A, "shared", [s[C], D])
    assert "A.cache_read(shared, C, D)" in str(s), str(s)
    with pytest.raises(TypeError, match=r"cache_read: readers must be te.Tensors or te.Stages "
                       r"\(a list of them\), not int"):
        s.cache_read(A, "shared", [C, 3])
    with pytest.raises(TypeError, match=r"cache_read: readers must be a te.Tensor or te.Stage, "
                       r"or a list of them, not str"):
        s.cache_read(A, "shared", "C")


def test_te_constants_take_the_other_sides_type(device):
    U = te.placeholder((8,), "uint32", name="U")
    I = te.placeholder((8,), "int32", name="I")
    u = np.array([0, 1, 2, 3, 2**31, 2**32 - 1, 7, 8], np.uint32)
    for body, want, dtype in (
            (lambda i: U[i] + 4000000000, u + np.uint32(4000000000), "uint32"),  # wraps
            (lambda i: U[i] < 3000000000, u < 3000000000, "bool"),
            (lambda i: U[i] // 4294967295, u // np.uint32(4294967295), "uint32")):
        C = te.compute((8,), body, name="C")
        f = kiln.build(te.create_schedule(C), [C], [U], "k", device)
        out = kiln.empty((8,), dtype, device)
        f(kiln.tensor(u, device), out)
        np.testing.assert_array_equal(out.numpy(), want)
    with pytest.raises(kiln.InvalidArgument, match=r"-1 next to an expression of type u32 does not fit "
                       r"u32 \[0, 4294967295\]"):
        te.compute((8,), lambda i: U[i] + (-1), name="C")
    with pytest.raises(kiln.InvalidArgument, match=r"2147483648 next to an expression of type i32"):
        te.compute((8,), lambda i: I[i] * 2**31, name="C")
    with pytest.raises(kiln.InvalidArgument, match=r"does not fit u32"):
        te.compute((8,), lambda i: U[i] + 2**32, name="C")


def test_te_definitions_use_only_their_own_axes(device):
    # An axis that is not the compute's own, or a reduction hidden in a
    # reducer, is refused with the definition instead of becoming a scalar
    # parameter of the kernel.
    A = te.placeholder((8,), "float32", name="A")
    k, k2 = te.reduce_axis(8, "k"), te.reduce_axis(8, "k2")
    C = te.compute((8,), lambda i: A[i] * 2, name="C")
    X = te.placeholder((4, 64), "float32", name="X")
    kk = te.reduce_axis(64, "kk")
    for body, name, message in (
            (lambda i: A[k], "B", "compute 'B': axis 'k' is neither an axis of 'B' nor one its "
                                  "reduction takes"),
            (lambda i: te.sum(A[k], k2), "B", "axis 'k' is neither an axis of 'B'"),
            (lambda i: A[C.axis[0]], "D", "compute 'D': axis 'i' is neither an axis of 'D'"),
            (lambda i: te.sum(A[k] * A[k], [k, k]), "E",
             "compute 'E': reduction axis 'k' is listed twice in its sum")):
        with pytest.raises(kiln.InvalidArgument, match=message):
            te.create_schedule(te.compute((8,), body, name=name))
    Y = te.compute((4,), lambda i: te.reduce(
        "s", lambda a, n: [a[0] + te.sum(n[0], te.reduce_axis(3, "q"))], [0.0], [X[i, kk]],
        kk)[0], name="Y")
    with pytest.raises(kiln.InvalidArgument,
                       match="compute 'Y': reducer 's' has a reduction inside its combine"):
        te.create_schedule(Y)
    with pytest.raises(kiln.InvalidArgument, match="te.reduce 'r': no values to reduce"):
        te.reduce("r", lambda a, n: [], [], [], kk)
    # Kernel parameters are called by name: a size var may not share a tensor's.
    n = te.size_var("n")
    An = te.placeholder((n,), "float32", name="n")
    Bn = te.compute((n,), lambda i: An[i] * 2, name="Bn")
    with pytest.raises(kiln.InvalidArgument, match="size var 'n' has the name of tensor 'n'"):
        kiln.build(te.create_schedule(Bn), [Bn], [An], "f", device)


def test_te_takes_numpy_scalars(device, rng):
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[np.int64(7) - i] * np.float32(1.5) + np.int32(2), name="B")
    f = kiln.build(te.create_schedule(B), [B], [A], "g", device)
    a = rng.standard_normal(8).astype(np.float32)
    b = kiln.empty((8,), device=device)
    f(kiln.tensor(a, device), b)
    np.testing.assert_allclose(b.numpy(), a[::-1] * np.float32(1.5) + 2, rtol=1e-6)
    assert str(te.const(np.float32(0.5))) == str(te.const(0.5))
    with pytest.raises(kiln.InvalidArgument, match="got complex64"):
        A[0] + np.complex64(1j)


def test_te_errors(device):
    A = te.placeholder((8, 8), "float32", name="A")
    with pytest.raises(kiln.InvalidArgument, match="rank 2 but is indexed with 1"):
        te.compute((8,), lambda i: A[i], name="B")
    with pytest.raises(TypeError):
        te.compute((8, 8), lambda i: A[i, i], name="B")  # the lambda takes one index, not two
    with pytest.raises(ZeroDivisionError):
        te.compute((8,), lambda i: 1 / 0, name="B")
    with pytest.raises(kiln.InvalidArgument, match="not integral"):
        te.compute((8,), lambda i: i * 2.5, name="B")
    with pytest.raises(kiln.InvalidArgument, match="te.compute 'B': 1 axis names for 2 axes"):
        te.compute((8, 8), lambda i, j: A[i, j], name="B", axis_names=["x"])
    with pytest.raises(kiln.InvalidArgument, match="must come from te.reduce_axis.*own index"):
        te.compute((8,), lambda i: te.sum(A[i, i], i), name="B")
    r = te.reduce_axis(8, "r")
    with pytest.raises(kiln.InvalidArgument, match="te.reduce 'am': combine must return"):
        te.compute((8,), lambda i: te.reduce("am", lambda acc, x: None, [0.0], [A[i, r]], r)[0],
                   name="B")
    with pytest.raises(kiln.InvalidArgument, match="truth value"):
        te.compute((8,), lambda i: A[i, i] if A[i, i] > 0 else 0.0, name="B")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B)
    with pytest.raises(kiln.InvalidArgument):
        s[B].bind(s[B].axis[0], "warpIdx.x")
    with pytest.raises(kiln.InvalidArgument):
        s[B].split(s[B].axis[0], 0)
    with pytest.raises(kiln.InvalidArgument, match="reorder of stage 'B': no axes to reorder"):
        s[B].reorder()
    for factor in (2**31 - 1, 2**31, 2**32 + 4, 2**40):  # extents are i32
        with pytest.raises(kiln.InvalidArgument, match="the factor must be at most 2"):
            s[B].split(s[B].axis[0], factor)
    with pytest.raises(kiln.InvalidArgument):
        s[A]
    other = te.compute((8,), lambda i: A[i, 0], name="O")
    with pytest.raises(kiln.InvalidArgument):
        s[B].split(te.create_schedule(other)[other].axis[0], 2)
    with pytest.raises(kiln.Error, match="A"):
        kiln.build(s, [B], [], "nope", device)  # A is read but not an input
    with pytest.raises(kiln.InvalidArgument, match="dtype"):
        te.placeholder((4,), "float64")
    with pytest.raises(kiln.InvalidArgument, match="at least one dimension"):
        te.placeholder((), "float32")
    with pytest.raises(kiln.InvalidArgument, match="at least one dimension"):
        te.compute((), lambda: 1.0)
    with pytest.raises(kiln.InvalidArgument, match="extent must be an integer"):
        te.reduce_axis(2.5)
    with pytest.raises(kiln.InvalidArgument, match="extent is -3; an extent is at least 0"):
        te.reduce_axis(-3)
    with pytest.raises(kiln.InvalidArgument, match="a dimension is -7; an extent is at least 0"):
        te.placeholder((-7,), "float32")
    # An expression deeper than the compiler goes: refused by name, however
    # deep, before anything recursive sees it.
    X = te.placeholder((8,), "float32", name="X")

    def deep(i):
        v = X[i]
        for _ in range(3000):
            v = -v
        return v
    D = te.compute((8,), deep, name="D")
    with pytest.raises(kiln.InvalidArgument, match="compute 'D': the body nests more than 512"):
        kiln.build(te.create_schedule(D), [D], [X], "deep", device)
    with pytest.raises(kiln.InvalidArgument, match="1 axis names for 2 axes"):
        te.create_schedule(te.compute((2, 2), lambda i, j: A[i, j], name="N", axis_names=["a"]))
    # Stages inlined into one another nesting deeper than any one of them:
    # 8 of 100 levels (measured after lowering), and 300 of 400 (refused
    # before anything expands them; this crashed the process).
    def negs(v, n):
        for _ in range(n):
            v = -v
        return v
    for count, depth in ((8, 100), (300, 400)):
        T, stages = X, []
        for k in range(count):
            T = te.compute((8,), lambda i, T=T: negs(T[i], depth), name=f"T{k}")
            stages.append(T)
        s = te.create_schedule(T)
        for t in stages[:-1]:
            s[t].compute_inline()
        with pytest.raises(kiln.InvalidArgument, match="stages inlined into the kernel nest"):
            kiln.build(s, [T], [X], "inlined", device)
        with pytest.raises(kiln.InvalidArgument, match="stages inlined into the kernel nest"):
            te.lower_kernels(s, [T], [X], "inlined")


def test_te_computes_check_types_indices_and_constants(device, rng):
    A = te.placeholder((8,), "int32", name="A")
    F = te.placeholder((4, 8), "float32", name="F")
    H = te.placeholder((8,), "float16", name="H")
    # Type mistakes name the compute, not a line of the lowered kernel.
    cases = [
        (lambda i: te.exp(A[i]), r"compute 'B': `A\[i\]` has type i32; expected a float"),
        (lambda i: ~F[0, i], r"compute 'B': `F\[0, i\]` has type f32; expected bool"),
        (lambda i: F[0, i] + te.cast("float16", A[i]), "compute 'B': operands of"),
        (lambda i: F[4, i], "compute 'B' reads `F` at index 4 of dimension 0, outside its extent 4"),
        (lambda i: F[0, -1], "compute 'B' reads `F` at index -1 of dimension 1, below 0"),
    ]
    for body, message in cases:
        B = te.compute((8,), body, name="B")
        with pytest.raises(kiln.InvalidArgument, match=message):
            te.create_schedule(B)
    k = te.reduce_axis(8, name="k")
    R = te.compute((4,), lambda i: te.sum(te.sqrt(A[k]), [k]), name="R")
    with pytest.raises(kiln.InvalidArgument, match=r"compute 'R': `A\[k\]` has type i32"):
        te.create_schedule(R)
    # An operand used twice, forty times over (2^40 operations written out):
    # refused at once, not expanded.
    def doubled(i):
        x = F[0, i]
        for _ in range(40):
            x = x + x
        return x
    with pytest.raises(kiln.InvalidArgument, match="more than 65536 operations written out"):
        te.create_schedule(te.compute((8,), doubled, name="D"))
    # A constant a float type would round to infinity; infinity itself is fine.
    for make in (lambda: F[0, 0] + 1e39, lambda: te.const(-3.5e38), lambda: H[0] * 65520.0,
                 lambda: H[0] + 100000, lambda: te.const(7e4, "float16")):
        with pytest.raises(kiln.InvalidArgument, match="beyond the largest finite f(32|16)"):
            make()
    # The largest finite values and infinity build, and read back as such.
    B = te.compute((4, 8), lambda i, j: te.select(F[i, j] > 0.0, te.const(3.4028234663852886e38),
                                                 te.const(float("-inf"))), name="B")
    kernel = kiln.build(te.create_schedule(B), [B], [F], "limits", device)
    f = rng.standard_normal((4, 8)).astype(np.float32)
    out = _poisoned((4, 8), np.float32, device)
    kernel(kiln.tensor(f, device), out)
    np.testing.assert_array_equal(out.numpy(),
                                  np.where(f > 0, np.float32(3.4028234663852886e38), -np.inf))



PIPELININGS = ["double_buffer", "double_buffer(branch_free)", "copy_ahead",
               "copy_ahead(registers)", "copy_ahead(registers, branch_free)",
               "copy_ahead(registers, no_branch)", "copy_ahead(registers, peeled)"]


def _pipeline(stage, how):
    # double_buffer([branch_free=True]), copy_ahead() or
    # copy_ahead(through_registers=True[, branch_free=True | last=...]).
    if how == "copy_ahead(registers, branch_free)":
        stage.copy_ahead(through_registers=True, branch_free=True)
    elif how.startswith("copy_ahead(registers, "):
        stage.copy_ahead(through_registers=True, last=how[len("copy_ahead(registers, "):-1])
    elif how.startswith("copy_ahead("):
        stage.copy_ahead(through_registers=True)
    elif how == "double_buffer(branch_free)":
        stage.double_buffer(branch_free=True)
    else:
        getattr(stage, how)()


@pytest.mark.parametrize("pipelining", PIPELININGS)
@pytest.mark.parametrize("mnk", [(1, 1, 1), (33, 7, 40), (70, 45, 17)], ids=str)
def test_te_shared_memory_matmul(device, rng, mnk, pipelining):
    M, N, K = mnk
    A, B, C = _matmul(M, N, K)
    s = te.create_schedule(C)
    As = s.cache_read(A, "shared", [C])
    Bs = s.cache_read(B, "shared", [C])
    Cl = s.cache_write(C, "local")
    i, j = s[C].axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    ty, iii = s[C].split(ii, 2)
    tx, jii = s[C].split(ji, 2)
    s[C].reorder(ty, tx, iii, jii)
    s[C].bind(io, "blockIdx.y")
    s[C].bind(jo, "blockIdx.x")
    s[C].bind(ty, "threadIdx.y")
    s[C].bind(tx, "threadIdx.x")
    s[Cl].compute_at(s[C], tx)
    ko, ki = s[Cl].split(s[Cl].reduce_axis[0], 4)
    s[Cl].reorder(ko, ki, *s[Cl].axis)
    fma = "registers, " in pipelining  # as the library's rule for Dawn
    if fma:
        s[Cl].fused_multiply_add()
    for T in (As, Bs):
        s[T].compute_at(s[Cl], ko)
        s[T].storage_align(s[T].axis[0], 8, 1)
        _pipeline(s[T], pipelining)
        f = s[T].fuse(*s[T].axis)
        rest, lanes = s[T].split(f, 64)
        y, x = s[T].split(lanes, 8)
        s[T].bind(y, "threadIdx.y")
        s[T].bind(x, "threadIdx.x")
    assert "A.cache_read(shared, C)" in str(s)
    assert "A_shared." + (pipelining if "(" in pipelining else pipelining + "()") in str(s)
    lowered = te.lower(s, [C], [A, B], "mm")
    assert "shared" in lowered
    steps = -(-K // 4)  # of the k loop; peeled, one step is only the last one's math
    assert ("A_shared_buf_staged" in lowered) == (
        pipelining != "copy_ahead" and not (pipelining.endswith("peeled)") and steps == 1))
    assert ("C_local.fused_multiply_add()" in str(s)) == fma
    assert ("= fma(A_shared_buf[" in lowered) == fma
    if pipelining.startswith("copy_ahead(registers") and steps > 1:
        # The next step's index clamped where the last step copies again.
        assert ("min(k_outer + 1" in lowered) == pipelining.endswith(("branch_free)", "no_branch)"))
    if pipelining.startswith("copy_ahead"):
        with pytest.raises(kiln.InvalidArgument, match="double-buffered or copied ahead, not both"):
            s[As].double_buffer()
    _check_matmul(s, (A, B, C), (M, N, K), device, rng)


@pytest.mark.parametrize("K", [257, 258])
def test_te_unrolled_peeled_loop_counts_the_iterations_it_unrolls(K):
    # A loop whose last step is peeled unrolls one iteration fewer than its
    # extent: 257 steps unroll 256 (the limit); 258 are refused. (Lowered
    # only: CPU implementations take minutes to compile 256 copies.)
    A, B, C = _matmul(2, 2, K)
    s = te.create_schedule(C)
    As = s.cache_read(A, "shared", [C])
    Cl = s.cache_write(C, "local")
    s[C].bind(s[C].axis[0], "threadIdx.y")
    s[C].bind(s[C].axis[1], "threadIdx.x")
    s[Cl].compute_at(s[C], s[C].axis[1])
    s[As].compute_at(s[Cl], s[Cl].reduce_axis[0])
    s[As].copy_ahead(through_registers=True, last="peeled")
    s[Cl].unroll(s[Cl].reduce_axis[0])
    if K == 258:
        with pytest.raises(kiln.InvalidArgument, match="axis 'k' of stage 'C_local' is unrolled "
                                                       "but has extent 258, more than the 256"):
            te.lower(s, [C], [A, B], "mm")
        return
    assert "unroll(0, 256)" in te.lower(s, [C], [A, B], "mm")


def test_te_copy_ahead_refuses_unknown_or_conflicting_last_steps():
    A, B, C = _matmul(8, 8, 8)
    s = te.create_schedule(C)
    As = s.cache_read(A, "shared", [C])
    with pytest.raises(kiln.InvalidArgument, match="last is 'branch_free', 'no_branch' or 'peeled', not 'sideways'"):
        s[As].copy_ahead(through_registers=True, last="sideways")
    with pytest.raises(kiln.InvalidArgument, match="branch_free=True is last='branch_free'"):
        s[As].copy_ahead(through_registers=True, branch_free=True, last="peeled")
    with pytest.raises(kiln.InvalidArgument, match="peeled only through registers"):
        s[As].copy_ahead(last="peeled")
    s[As].copy_ahead(through_registers=True, branch_free=True, last="branch_free")
    assert "A_shared.copy_ahead(registers, branch_free)" in str(s)


def test_te_fused_multiply_add_needs_a_float_sum_of_products():
    X = te.placeholder((8, 8), "float32", name="X")
    I = te.placeholder((8, 8), "int32", name="I")
    k = te.reduce_axis(8, "k")
    cases = {
        "M": (lambda i: te.max(X[i, k] * X[i, k], k), "the stage is not a sum"),
        "S": (lambda i: te.sum(X[i, k] + 1.0, k), "sums something other than a product"),
        "Q": (lambda i: te.sum(I[i, k] * I[i, k], k), "the stage sums integers"),
        "E": (lambda i: X[i, 0] * 2.0, "the stage is not a sum"),
    }
    for name, (body, message) in cases.items():
        Y = te.compute((8,), body, name=name)
        s = te.create_schedule(Y)
        with pytest.raises(kiln.InvalidArgument, match=f"fused_multiply_add of stage '{name}': .*{message}"):
            s[Y].fused_multiply_add()
        assert str(s) == ""  # nothing recorded


def test_te_stage_properties_apply_once_and_errors_name_the_stage():
    A, B, C = _matmul(8, 8, 8)
    s = te.create_schedule(C)
    As = s.cache_read(A, "shared", [C])
    s[C].fused_multiply_add()
    with pytest.raises(kiln.InvalidArgument, match="fused_multiply_add of stage 'C': the stage already accumulates with fma"):
        s[C].fused_multiply_add()
    s[As].double_buffer()
    with pytest.raises(kiln.InvalidArgument, match="double_buffer of stage 'A_shared': the stage is already double-buffered"):
        s[As].double_buffer()
    with pytest.raises(kiln.InvalidArgument, match="bind of stage 'C', axis 'i': 'threadIdx.z' is not a launch axis"):
        s[C].bind(s[C].axis[0], "threadIdx.z")
    assert str(s) == "A.cache_read(shared, C)\nC.fused_multiply_add()\nA_shared.double_buffer()\n"
    with pytest.raises(kiln.InvalidArgument, match="tensor 'A' is listed twice among the inputs"):
        te.lower(s, [C], [A, B, A])


def test_te_reads_provably_out_of_bounds_are_errors():
    n = te.size_var("n")
    X = te.placeholder((n,), "float32", name="X")
    Z = te.compute((n,), lambda i: X[i + 1], name="Z")
    with pytest.raises(kiln.InvalidArgument,
                       match=r"compute 'Z' reads 'X' out of bounds: index 0 \(i \+ 1\) runs over \[1, n\]"):
        te.create_schedule(Z)
    ok = te.compute((n,), lambda i: te.select(i + 1 < n, X[i + 1], 0.0), name="ok")
    assert "X[i + 1]" in te.lower(te.create_schedule(ok), [ok], [X])


@pytest.mark.parametrize("make", [
    lambda: te.placeholder((4,), "float32", name=""),
    lambda: te.compute((4,), lambda i: i * 2, name=""),
    lambda: te.compute((4,), lambda i: i * 2, name="Y", axis_names=[""]),
    lambda: te.reduce_axis(4, ""),
    lambda: te.size_var(""),
], ids=["placeholder", "compute", "axis_names", "reduce_axis", "size_var"])
def test_te_names_are_not_empty(make):
    with pytest.raises(kiln.InvalidArgument, match="the name is empty"):
        make()


@pytest.mark.parametrize("pipelining", PIPELININGS)
@pytest.mark.parametrize("mnk", [(8, 8, 4), (8, 8, 9), (7, 33, 5), (16, 16, 8)], ids=str)
def test_te_pipeline_inside_serial_output_loops(device, rng, mnk, pipelining):
    # Each thread computes 2 x 2 outputs in serial loops, and the shared
    # stages are computed at the reduction's outer loop inside them: the
    # pipeline runs again for every output, and with an odd number of steps
    # its first copy writes the half the previous run read last.
    M, N, K = mnk
    A, B, C = _matmul(M, N, K)
    s = te.create_schedule(C)
    As = s.cache_read(A, "shared", [C])
    Bs = s.cache_read(B, "shared", [C])
    c = s[C]
    io, jo, ii, ji = c.tile(c.axis[0], c.axis[1], 8, 8)
    ty, iii = c.split(ii, 2)
    tx, jii = c.split(ji, 2)
    c.reorder(ty, tx, iii, jii)
    c.bind(io, "blockIdx.y")
    c.bind(jo, "blockIdx.x")
    c.bind(ty, "threadIdx.y")
    c.bind(tx, "threadIdx.x")
    ko, ki = c.split(c.reduce_axis[0], 4)
    for T in (As, Bs):
        s[T].compute_at(c, ko)
        _pipeline(s[T], pipelining)
        f = s[T].fuse(*s[T].axis)
        _, lanes = s[T].split(f, 16)
        y, x = s[T].split(lanes, 4)
        s[T].bind(y, "threadIdx.y")
        s[T].bind(x, "threadIdx.x")
    _check_matmul(s, (A, B, C), (M, N, K), device, rng)


def _row_sum_rfactor(n, factor):
    # Y[i] = sum of X[i, :n], its reduction split by `factor` and the inner
    # axis rfactored: (X, Y, schedule, k_outer, rfactor stage).
    X = te.placeholder((5, n), "float32", name="X")
    k = te.reduce_axis(n, "k")
    Y = te.compute((5,), lambda i: te.sum(X[i, k], k), name="Y")
    s = te.create_schedule(Y)
    ko, ki = s[Y].split(s[Y].reduce_axis[0], factor)
    return X, Y, s, ko, s.rfactor(Y, ki)


def test_te_rfactor_and_tuple_reducer(device, rng):
    X, Y, s, _, rf = _row_sum_rfactor(300, 32)
    s[Y].bind(s[Y].axis[0], "blockIdx.x")
    s[Y].bind(s[Y].reduce_axis[0], "threadIdx.x")
    s[rf].compute_at(s[Y], s[Y].reduce_axis[0])
    kern = kiln.build(s, [Y], [X], "row_sum", device)
    x = rng.standard_normal((5, 300)).astype(np.float32)
    y = _poisoned(5, np.float32, device)
    kern(kiln.tensor(x, device), y)
    np.testing.assert_allclose(y.numpy(), x.sum(axis=1), rtol=1e-4, atol=1e-4)

    k2 = te.reduce_axis(300, "k2")

    def combine(acc, nxt):
        take = nxt[1] > acc[1]
        return [te.select(take, nxt[0], acc[0]), te.select(take, nxt[1], acc[1])]

    Am = te.compute((5,), lambda i: te.reduce("argmax", combine, [-1, -np.inf],
                                              [k2, X[i, k2]], k2)[0], name="Am")
    s = te.create_schedule(Am)
    kern = kiln.build(s, [Am], [X], "argmax", device)
    x[2, 10] = x[2, 20] = 9.0  # a tie: the first wins
    am = _poisoned(5, np.int32, device)
    kern(kiln.tensor(x, device), am)
    np.testing.assert_array_equal(am.numpy(), np.argmax(x, axis=1))


def test_te_body_uses_every_value_of_a_tuple_reduction(device, rng):
    """A body may combine the values of one tuple reduction: the mean of
    the positive elements of each row, from their count and their sum."""
    X = te.placeholder((7, 33), "float32", name="X")
    k = te.reduce_axis(33, "k")

    def body(i):
        count, total = te.reduce("count_sum", lambda a, b: [a[0] + b[0], a[1] + b[1]], [0, 0.0],
                                 [te.cast("int32", X[i, k] > 0.0),
                                  te.select(X[i, k] > 0.0, X[i, k], 0.0)], k)
        return total / te.cast("float32", count)

    Y = te.compute((7,), body, name="Y")
    s = te.create_schedule(Y)
    s[Y].bind(s[Y].axis[0], "threadIdx.x")
    kern = kiln.build(s, [Y], [X], "positive_mean", device)
    x = rng.standard_normal((7, 33)).astype(np.float32)
    y = _poisoned(7, np.float32, device)
    kern(kiln.tensor(x, device), y)
    want = np.where(x > 0, x, 0).sum(axis=1) / (x > 0).sum(axis=1)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)


def test_te_names_and_unrolled_extents_are_checked_by_stage():
    A = te.placeholder((4096,), "float32", name="A")
    B = te.compute((4096,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B)
    s[B].unroll(s[B].axis[0])
    with pytest.raises(kiln.InvalidArgument, match="axis 'i' of stage 'B' is unrolled but has "
                                                   "extent 4096, more than the 256 iterations"):
        te.lower(s, [B], [A], "x")
    s = te.create_schedule(B)
    _, inner = s[B].split(s[B].axis[0], 256)
    s[B].unroll(inner)
    assert "unroll(0, 256)" in te.lower(s, [B], [A], "x")
    def reading(name):
        P = te.placeholder((8,), "float32", name=name)
        return te.compute((8,), lambda i: P[i], name="D")

    for make, what in [(lambda: reading(" A"), "a placeholder"),
                       (lambda: te.compute((8,), lambda i: A[i], name="B "), "a compute"),
                       (lambda: te.compute((8,), lambda i: A[i], name="B\nC"), "a compute"),
                       (lambda: te.compute((8,), lambda i: A[i], name="B",
                                           axis_names=["i\t"]), "compute 'B': axis 0")]:
        with pytest.raises(kiln.InvalidArgument, match=f"{what} is named .*: a name may not "
                                                       "begin or end with a space"):
            te.create_schedule(make())
    C = te.compute((8,), lambda i: A[i] * 2.0, name="C", axis_names=["i, j"])
    s = te.create_schedule(C)
    s[C].split(s[C].axis[0], 4)
    with pytest.raises(kiln.InvalidArgument, match="split takes 2 argument\\(s\\), not 3 \\(if a "
                                                   "name holds ', ', it reads as two arguments\\)"):
        te.create_schedule(C).apply(str(s))


@pytest.mark.parametrize("op", ["sum", "max"])
def test_te_row_reduction_across_threads(device, rng, op):
    """A row per workgroup, 64 threads each: through subgroups where the
    device has them (a NaN in one row propagates through max), else the tree;
    and an argmax whose (index, value) pairs combine the same way."""
    X = te.placeholder((6, 1000), "float32", name="X")
    k = te.reduce_axis(1000, "k")
    Y = te.compute((6,), lambda i: getattr(te, op)(X[i, k], k), name="Y")
    s = te.create_schedule(Y)
    ko, ki = s[Y].split(s[Y].reduce_axis[0], 64)
    s[Y].bind(s[Y].axis[0], "blockIdx.x")
    s[Y].bind(ki, "threadIdx.x")
    subgroups = device.has_feature("subgroups")
    if subgroups:
        s[Y].subgroup_reduce()
        assert "Y.subgroup_reduce()" in str(s)
        assert "subgroup_" in te.lower(s, [Y], [X], "rows")
    else:
        print(f"{device} has no subgroups: the shared-memory tree only")
    kern = kiln.build(s, [Y], [X], "rows", device)
    x = rng.standard_normal((6, 1000)).astype(np.float32)
    x[3, 999] = np.nan
    y = _poisoned(6, np.float32, device)
    kern(kiln.tensor(x, device), y)
    want = getattr(np, op)(x, axis=1)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)

    def better(acc, nxt):
        take = (nxt[1] > acc[1]) | ((nxt[1] == acc[1]) & (nxt[0] < acc[0]))
        return [te.select(take, nxt[0], acc[0]), te.select(take, nxt[1], acc[1])]

    k2 = te.reduce_axis(1000, "k2")
    Am = te.compute((6,), lambda i: te.reduce("argmax", better, [2**31 - 1, -np.inf],
                                              [k2, X[i, k2]], k2)[0], name="Am")
    s = te.create_schedule(Am)
    ko, ki = s[Am].split(s[Am].reduce_axis[0], 64)
    s[Am].bind(s[Am].axis[0], "blockIdx.x")
    s[Am].bind(ki, "threadIdx.x")
    if subgroups:
        s[Am].subgroup_reduce()  # a butterfly of shuffles of (index, value) pairs
        assert "subgroup_shuffle" in te.lower(s, [Am], [X], "argmax")
    kern = kiln.build(s, [Am], [X], "argmax", device)
    x = rng.standard_normal((6, 1000)).astype(np.float32)
    x[1, 700] = x[1, 900] = 9.0  # a tie across threads: the first wins
    am = _poisoned(6, np.int32, device)
    kern(kiln.tensor(x, device), am)
    np.testing.assert_array_equal(am.numpy(), np.argmax(x, axis=1))


def test_te_subgroup_reduce_beside_a_unit_thread_axis(device, rng):
    """A data axis bound to threadIdx.y with extent 1 leaves one reduction
    per workgroup: subgroup_reduce takes it; at extent 2 it is refused."""
    if not device.has_feature("subgroups"):
        pytest.skip(f"{device} has no subgroups")
    X = te.placeholder((6, 1000), "float32", name="X")
    k = te.reduce_axis(1000, "k")
    Y = te.compute((6,), lambda i: te.max(X[i, k], k), name="Y")

    def schedule(rows_per_workgroup):
        s = te.create_schedule(Y)
        io, ii = s[Y].split(s[Y].axis[0], rows_per_workgroup)
        ko, ki = s[Y].split(s[Y].reduce_axis[0], 64)
        s[Y].bind(io, "blockIdx.x")
        s[Y].bind(ii, "threadIdx.y")
        s[Y].bind(ki, "threadIdx.x")
        s[Y].subgroup_reduce()
        return s

    s = schedule(1)
    assert "subgroup_max" in te.lower(s, [Y], [X], "rows")
    kern = kiln.build(s, [Y], [X], "rows", device)
    x = rng.standard_normal((6, 1000)).astype(np.float32)
    x[4, 3] = np.nan
    y = kiln.tensor(np.full(6, 7e30, np.float32), device)  # not NaN: row 4 must be written
    kern(kiln.tensor(x, device), y)
    np.testing.assert_array_equal(y.numpy(), np.max(x, axis=1))
    with pytest.raises(kiln.InvalidArgument, match="not the workgroup's only thread axis"):
        kiln.build(schedule(2), [Y], [X], "rows", device)


def test_te_staging_errors(device):
    A = te.placeholder((8, 8), "float32", name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C)
    with pytest.raises(kiln.InvalidArgument, match="an output"):
        s[C].compute_at(s[B], s[B].axis[0])
    with pytest.raises(kiln.InvalidArgument, match="not a memory scope"):
        s.cache_read(A, "texture", [B])
    with pytest.raises(kiln.InvalidArgument, match="does not read it"):
        s.cache_read(A, "shared", [C])
    with pytest.raises(kiln.InvalidArgument, match="the stage is not a reduction"):
        s.rfactor(C, s[C].axis[0])
    s[B].set_scope("shared")
    with pytest.raises(kiln.Error, match="neither inlined, computed at another stage nor"):
        kiln.build(s, [C], [A], "nope", device)


def test_te_program_of_several_kernels(device, rng):
    X = te.placeholder((7, 33), "float32", name="X")
    k = te.reduce_axis(33, "k")
    M = te.compute((7,), lambda i: te.max(X[i, k], k), name="M")
    Y = te.compute((7, 33), lambda i, j: te.exp(X[i, j] - M[i]), name="Y")
    s = te.create_schedule(Y)
    s[M].bind(s[M].axis[0], "threadIdx.x")
    s[Y].bind(s[Y].axis[0], "threadIdx.x")
    texts, intermediates = te.lower_kernels(s, [Y], [X], "shifted_exp")
    assert [t.split("(")[0] for t in texts] == ["fn shifted_exp_M", "fn shifted_exp_Y"]
    assert [t.name for t in intermediates] == ["M"]
    with pytest.raises(kiln.InvalidArgument, match="LowerKernels makes it a kernel of its own"):
        te.lower(s, [Y], [X], "one")
    kernels, intermediates = kiln.build_kernels(s, [Y], [X], "shifted_exp", device)
    x = rng.standard_normal((7, 33)).astype(np.float32)
    xt = kiln.tensor(x, device)
    m = _poisoned(7, np.float32, device)
    y = _poisoned((7, 33), np.float32, device)
    kernels[0](xt, m)
    kernels[1](xt, m, y)
    np.testing.assert_allclose(y.numpy(), np.exp(x - x.max(axis=1, keepdims=True)), rtol=1e-5)


def test_te_floor_division_and_modulo_are_pythons(device):
    # a == (a // b) * b + a % b for negative operands too, as in Python.
    X = te.placeholder((8,), "int32", name="X")
    F = te.placeholder((8,), "float32", name="F")
    Y = te.compute((8,), lambda i: X[i] // 3 * 3 + X[i] % 3 - X[i] + X[i] % 3, name="Y")
    G = te.compute((8,), lambda i: F[i] % 0.75, name="G")
    x = np.arange(-4, 4, dtype=np.int32)
    f = np.linspace(-2, 2, 8).astype(np.float32)
    for out_t, ins, arrays, want in ((Y, [X], [x], x % 3), (G, [F], [f], np.mod(f, 0.75))):
        s = te.create_schedule(out_t)
        s[out_t].bind(s[out_t].axis[0], "threadIdx.x")
        kern = kiln.build(s, [out_t], ins, "m", device)
        out = kiln.tensor(np.full(8, -7, arrays[0].dtype), device)
        kern(*[kiln.tensor(a, device) for a in arrays], out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_te_misuse_is_named():
    """Wrong operand types are TypeErrors naming the function; a kernel name
    the IR cannot spell, a tensor of another thread and a reducer whose
    combine uses an axis are InvalidArgument naming them, before lowering."""
    import threading

    A = te.placeholder((8,), "float32", name="A")
    for call, want in (
        (lambda: te.placeholder((None,), "float32"), "te.placeholder: a dimension must be"),
        (lambda: te.exp(None), "te.exp: argument 1 must be a kiln.te expression"),
        (lambda: te.exp("x"), "te.exp: argument 1 must be"),
        (lambda: te.maximum("a", A[0]), "te.maximum: a must be"),
        (lambda: A[0] + "x", "operand must be a kiln.te expression, axis or number; got str"),
    ):
        with pytest.raises(kiln.ArgumentTypeError, match=want):  # InvalidArgument and TypeError
            call()
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    for name in ("", "fn", "f32", "1abc", "a b"):
        with pytest.raises(kiln.InvalidArgument, match=f"the kernel name '{name}' is not an identifier"):
            kiln.build(te.create_schedule(B), [B], [A], name)
    errors = []

    def other_thread():
        try:
            te.create_schedule(te.compute((8,), lambda i: A[i] + 1.0, name="Z"))
        except kiln.InvalidArgument as e:
            errors.append(str(e))

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert errors and "reads buffer 'A', which is not a tensor made on this thread" in errors[0], errors
    X = te.placeholder((4, 8), "float32", name="X")
    k = te.reduce_axis(8, "k")
    Y = te.compute((4,), lambda i: te.reduce(
        "r", lambda a, b: [a[0] + b[0] + te.cast("float32", k)], [0.0], [X[i, k]], k)[0], name="Y")
    with pytest.raises(kiln.InvalidArgument, match="reducer 'r' uses axis 'k' in its combine function"):
        te.create_schedule(Y)


def test_te_misuse_refused_where_it_happens():
    """Misuse that once slipped through to lowering (or past it): each is
    refused by the primitive or definition that makes it, naming it."""
    bad = kiln.InvalidArgument
    A = te.placeholder((8, 8), "float32", name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C)
    s[B].set_scope("shared")
    io, _ = s[C].split(s[C].axis[0], 4)
    s[B].compute_at(s[C], io)
    for factor in (2**31, 2**32 + 4, 2**40):  # refused, not lowered with a wrapped stride
        with pytest.raises(bad, match=rf"storage_align of stage 'B': factor {factor} and offset 1; "
                           r"the factor must be in \[1, 2\^30\]"):
            s[B].storage_align(s[B].axis[0], factor, 1)
    with pytest.raises(bad, match=r"storage_align: factor 18446744073709551616 is outside the "
                       r"64-bit integers"):
        s[B].storage_align(s[B].axis[0], 2**64, 1)
    s[B].storage_align(s[B].axis[0], 2**30, 1)  # the largest factor: a stride past 2^31
    with pytest.raises(bad, match=r"stage 'B' needs a buffer of 2 dimensions whose elements "
                       r"\(aligned by storage_align\) pass 2\^31"):
        te.lower(s, [C], [A], "k")

    # A constant fused extent past i32.
    for shape in ((65536, 65536), (46341, 46341), (65537, 65536)):
        X = te.placeholder(shape, "float32", name="X")
        Y = te.compute(shape, lambda i, j: X[i, j] + 1.0, name="Y")
        s = te.create_schedule(Y)
        with pytest.raises(bad, match=rf"fuse of stage 'Y': axes 'i' \(extent {shape[0]}\) and "
                           rf"'j' \(extent {shape[1]}\) fused would have an extent past 2\^31 - 1"):
            s[Y].fuse(*s[Y].axis)
    X = te.placeholder((46340, 46340), "float32", name="X")  # 2147395600: fits
    Y = te.compute((46340, 46340), lambda i, j: X[i, j] + 1.0, name="Y")
    s = te.create_schedule(Y)
    s[Y].fuse(*s[Y].axis)

    # A reduction used by a compute other than the one that took it.
    X = te.placeholder((4, 8), "float32", name="X")
    k = te.reduce_axis(8, "k")
    saved = []

    def body(i):
        saved.append(te.sum(X[i, k], k))
        return saved[0]

    Y = te.compute((4,), body, name="Y")
    Z = te.compute((4,), lambda i: saved[0] * 2.0, name="Z")
    with pytest.raises(bad, match=r"compute 'Z': uses the reduction 'sum' that compute 'Y' holds"):
        te.create_schedule([Y, Z])
    argmax = []

    def body2(i):
        argmax.extend(te.reduce("am", lambda a, b: [te.select(b[1] > a[1], b[0], a[0]),
                                                     te.maximum(a[1], b[1])],
                                [-1, -3e38], [te.cast("int32", k), X[i, k]], k))
        return argmax[0]

    Y2 = te.compute((4,), body2, name="Y2")
    Z2 = te.compute((4,), lambda i: argmax[1] + 1.0, name="Z2")
    with pytest.raises(bad, match=r"compute 'Z2': uses the reduction 'am1' that compute 'Y2'"):
        te.create_schedule([Y2, Z2])

    # Shapes take constants and size vars, not axes or reductions.
    C1 = te.compute((8,), lambda i: A[i, 0] + 1.0, name="C1")
    P = te.placeholder((C1.axis[0].var,), "float32", name="P")
    Q = te.compute((4,), lambda i: P[i] * 2.0, name="Q")
    with pytest.raises(bad, match=r"placeholder 'P': dimension 0 uses axis 'i'; a shape takes "
                       r"constants and size vars"):
        te.create_schedule(Q)
    P2 = te.placeholder((4,), "float32", name="P2")
    Q2 = te.compute((k,), lambda i: P2[i] * 2.0, name="Q2")
    with pytest.raises(bad, match=r"compute 'Q2': dimension 0 uses axis 'k'"):
        te.create_schedule(Q2)

    # compute_at at a stage that does not read this one, even indirectly.
    V = te.placeholder((8,), "float32", name="V")
    B3 = te.compute((8,), lambda i: V[i] * 2.0, name="B3")
    D3 = te.compute((8,), lambda i: V[i] * 3.0, name="D3")
    C3 = te.compute((8,), lambda i: B3[i] + D3[i], name="C3")
    s = te.create_schedule(C3)
    with pytest.raises(bad, match=r"compute_at of stage 'B3': stage 'D3' does not read this "
                       r"stage, directly or through other stages"):
        s[B3].compute_at(s[D3], s[D3].axis[0])
    assert str(s).strip() == ""

    # A user reducer's reduction axis stays inside its data axes.
    Y4 = te.compute((4,), lambda i: te.reduce("s", lambda a, b: [a[0] + b[0]], [0.0],
                                                [X[i, k]], k)[0], name="Y4")
    s = te.create_schedule(Y4)
    with pytest.raises(bad, match=r"reorder of stage 'Y4': it would put reduction axis 'k' outside "
                       r"data-parallel axis 'i'; a user-defined reducer keeps its reduction axes "
                       r"innermost"):
        s[Y4].reorder(s[Y4].reduce_axis[0], s[Y4].axis[0])

    # Reducer identities: a list of numbers of the values' types.
    with pytest.raises(bad, match=r"te.reduce 's': identity 0 is a bool, but value 0 is f32"):
        te.reduce("s", lambda a, b: [a[0] + b[0]], [True], [X[0, k]], k)
    with pytest.raises(kiln.ArgumentTypeError, match=r"te.reduce 's': identity must be a list "
                       r"\(one entry per value\), not float"):
        te.reduce("s", lambda a, b: [a[0] + b[0]], 0.0, [X[0, k]], k)

    # Kernel names from stage names that are not identifiers.
    W = te.placeholder((4,), "float32", name="W")
    B5 = te.compute((4,), lambda i: W[i] * 2.0, name="B-")
    B6 = te.compute((4,), lambda i: B5[i] * 3.0, name="B_")
    C5 = te.compute((4,), lambda i: B6[i] + 1.0, name="C")
    texts, _ = te.lower_kernels(te.create_schedule(C5), C5, W)
    assert [t.split("(")[0] for t in texts] == ["fn kernel_B_", "fn kernel_B__2", "fn kernel_C"]

    # Equal schedules hash alike.
    def prog(n):
        E = te.placeholder((n,), "float32", name="E")
        F = te.compute((n,), lambda i: E[i] + 1.0, name="F")
        sch = te.create_schedule(F)
        sch[F].split(sch[F].axis[0], 2)
        return sch

    assert prog(8) == prog(4096) and hash(prog(8)) == hash(prog(4096))
    assert hash(prog(8)) != hash(te.create_schedule(C5))  # no primitives


@pytest.mark.parametrize("extent,nparts", [(1000, 4), (9, 4), (7, 7), (3, 8), (1, 1), (4097, 3)],
                         ids=str)
def test_te_split_into_parts(device, rng, extent, nparts):
    A = te.placeholder((extent,), "float32", name="A")
    B = te.compute((extent,), lambda i: A[i] * 2.0 - 1.0, name="B")
    s = te.create_schedule(B)
    outer, inner = s[B].split(s[B].axis[0], nparts=nparts)
    factor = -(-extent // nparts)
    assert str(s).strip() == f"B.split(i, {factor})"  # recorded as the split by its factor
    assert -(-extent // factor) <= nparts
    s[B].bind(outer, "blockIdx.x")
    k = kiln.build(s, [B], [A], "parts", device=device)
    a = rng.standard_normal(extent).astype(np.float32)
    b = _poisoned(extent, np.float32, device)
    k(kiln.tensor(a, device), b)
    np.testing.assert_allclose(b.numpy(), a * 2.0 - 1.0, rtol=1e-6)


def test_te_split_into_parts_errors():
    n = te.size_var("n")
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B)
    with pytest.raises(kiln.InvalidArgument, match=r"split of stage 'B': axis 'i' has the extent n, "
                       r"not a constant; split a symbolic extent by a factor"):
        s[B].split(s[B].axis[0], nparts=4)
    A8 = te.placeholder((8,), "float32", name="A8")
    B8 = te.compute((8,), lambda i: A8[i] * 2.0, name="B8")
    s = te.create_schedule(B8)
    for nparts in (0, -1, 2**30 + 1):
        with pytest.raises(kiln.InvalidArgument, match=rf"axis 'i' split into {nparts} parts; the "
                           r"number of parts must be in \[1, 2\^30\]"):
            s[B8].split(s[B8].axis[0], nparts=nparts)
    for kwargs, want in (({}, "not neither"), ({"factor": 2, "nparts": 2}, "not both")):
        with pytest.raises(kiln.InvalidArgument, match=f"split: give the factor or nparts.*{want}"):
            s[B8].split(s[B8].axis[0], **kwargs)
    assert str(s).strip() == ""


def test_te_build_refuses_missing_features_at_build(device):
    """A kernel needing shader-f16 is refused when built for a device
    without it, rather than at its first call."""
    A = te.placeholder((8,), "float16", name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    if device.has_feature("shader-f16"):
        kiln.build(te.create_schedule(B), [B], [A], "h", device=device)
        return
    for build in (kiln.build, kiln.build_kernels):
        with pytest.raises(kiln.Unavailable, match="needs the 'shader-f16' feature"):
            build(te.create_schedule(B), [B], [A], "h", device=device)


def test_te_stages_axes_and_reductions_of_another_schedule_or_thread_are_named():
    import threading
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    s, s2 = te.create_schedule(C), te.create_schedule(C)
    D = s2.cache_write(C, "local")
    with pytest.raises(kiln.InvalidArgument, match="compute_at of stage 'B': stage 'C_local' is "
                                                   "not a stage of this schedule"):
        s[B].compute_at(s2[D], s2[D].axis[0])
    with pytest.raises(kiln.InvalidArgument, match="compute_at of stage 'B': stage 'C' is not a "
                                                   "stage of this schedule"):
        s[B].compute_at(s2[C], s2[C].axis[0])
    assert str(s).strip() == ""
    # An axis or a reduction made on another thread is an error, never a
    # scalar parameter.
    k = te.reduce_axis(8, "k")
    X = te.placeholder((4, 8), "float32", name="X")
    made = {}

    def elsewhere():
        Y = te.placeholder((4, 8), "float32", name="Y")
        try:
            te.create_schedule(te.compute(
                (4, 8), lambda i, j: Y[i, j] + te.cast("float32", k.var), name="R"))
        except kiln.InvalidArgument as e:
            made["axis"] = str(e)
        made["axes"] = te.reduce_axis(8, "m")
        made["sum"] = te.sum(X[0, made["axes"]], made["axes"])
    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert "compute 'R' uses 'k', an axis or the result of a reduction made on another " \
        "thread" in made["axis"]
    for body, name in ((lambda i: made["sum"], "sum"),
                       (lambda i: te.cast("float32", made["axes"].var), "m")):
        with pytest.raises(kiln.InvalidArgument, match=f"compute 'R2' uses '{name}', an axis or "
                                                       "the result of a reduction made on another"):
            te.create_schedule(te.compute((1,), body, name="R2"))
    # Reduced over here too (the reduction made on this thread).
    with pytest.raises(kiln.InvalidArgument, match="compute 'R3' uses 'm', an axis or the result "
                                                   "of a reduction made on another thread"):
        te.create_schedule(te.compute((4,), lambda i: te.sum(X[i, made["axes"]], made["axes"]),
                                      name="R3"))
    # A reducer's identity or combine function reads no tensor (each
    # thread's partial result starts from the identity).
    r = te.reduce_axis(8, "r")
    with pytest.raises(kiln.InvalidArgument, match="compute 'R4': reducer 'plus' reads tensor 'X' "
                                                   "in its combine function or identity"):
        te.create_schedule(te.compute((4,), lambda i: te.reduce(
            "plus", lambda a, b: [a[0] + b[0]], [X[0, 0]], [X[i, r]], r)[0], name="R4"))
    P = te.placeholder((made["axes"].var,), "float32", name="P")
    with pytest.raises(kiln.InvalidArgument, match="placeholder 'P': dimension 0 uses 'm', an "
                                                   "axis or the result of a reduction made on"):
        te.create_schedule(te.compute((4,), lambda i: P[i], name="Q"))
    # A shape reads no tensor.
    with pytest.raises(kiln.InvalidArgument, match="compute 'Q': dimension 0 reads tensor 'A'; a "
                                                   "shape takes constants and size vars"):
        te.create_schedule(te.compute((te.cast("int32", A[0]),), lambda i: A[i], name="Q"))


def test_te_numbers_take_the_type_of_any_expression_operand(device, rng):
    A = te.placeholder((33,), "float32", name="A")
    B = te.compute((33,), lambda i: te.maximum(0, A[i]) + te.minimum(1, A[i]) +
                   te.select(A[i] > 0, 2, A[i]) + te.pow(2, A[i]) + te.fma(0.5, 3, A[i]),
                   name="B")
    kern = kiln.build(te.create_schedule(B), [B], [A], "mixed", device)
    a = rng.standard_normal(33).astype(np.float32)
    b = _poisoned(33, np.float32, device)
    kern(kiln.tensor(a, device), b)
    want = (np.maximum(0, a) + np.minimum(1, a) + np.where(a > 0, 2, a) + np.power(2, a) +
            (0.5 * 3 + a)).astype(np.float32)
    np.testing.assert_allclose(b.numpy(), want, rtol=1e-5, atol=1e-6)
    # A bool takes the numbers 0 and 1 (True and False), no other.
    C = te.compute((33,), lambda i: te.select((A[i] > 0) == 1, 1.0, 0.0), name="C")
    kern = kiln.build(te.create_schedule(C), [C], [A], "bool_eq", device)
    c = _poisoned(33, np.float32, device)
    kern(kiln.tensor(a, device), c)
    np.testing.assert_array_equal(c.numpy(), (a > 0).astype(np.float32))
    for bad in (lambda i: (A[i] > 0) == 2, lambda i: (A[i] > 0) & -1):
        with pytest.raises(kiln.InvalidArgument, match=r"next to an expression of type bool does "
                                                       r"not fit bool \[0, 1\]"):
            te.compute((33,), lambda i: te.select(bad(i), 1.0, 0.0), name="D")
    # te.const makes constants of numbers only.
    for value in (A[0], te.reduce_axis(4, "r")):
        with pytest.raises(kiln.ops.ArgumentTypeError, match="te.const: the value must be a "
                                                             "number"):
            te.const(value, "int32")
    assert te.const(np.float32(2.5), "float16").dtype == "f16"
    # The constant is shown with the digits that tell it from the largest float.
    with pytest.raises(kiln.InvalidArgument, match=r"the constant 3.4028236e\+38 is beyond the "
                                                   r"largest finite f32"):
        te.compute((33,), lambda i: A[i] * 3.4028236e38, name="E")


def test_te_arrays_as_integers_and_stale_axes_are_named():
    n = np.array(8)
    A = te.placeholder(n, "float32", name="A")
    assert A.shape == (8,) or str(A.shape[0]) == "8"
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B)
    with pytest.raises(TypeError, match=r"split: factor must be an int, not .*array\(\[4\]\).*"
                                        r"which int\(\) refuses"):
        s[B].split(s[B].axis[0], np.array([4]))
    s[B].split(s[B].axis[0], np.array(4))
    _, _, s, ko, rf = _row_sum_rfactor(64, 16)
    with pytest.raises(kiln.InvalidArgument, match="axis 'k_outer' is not an axis of this "
                                                   "schedule, though the stage has an axis of "
                                                   "that name"):
        s[rf].split(ko, 2)


def test_te_float_constants_next_to_integers_must_fit():
    A = te.placeholder((4,), "float32", name="A")
    I = te.placeholder((4,), "int32", name="I")
    for body, want in ((lambda i: te.select((A[i] > 0) == 2.0, 1.0, 0.0), r"2.0 next to an "
                        r"expression of type bool does not fit bool \[0, 1\]"),
                       (lambda i: I[i] * 2.0**31, r"2147483648.0 next to an expression of type "
                        r"i32 does not fit i32"),
                       (lambda i: I[i] + 0.5, r"0.5 next to an expression of type i32 is not "
                        r"integral")):
        with pytest.raises(kiln.InvalidArgument, match=want):
            te.compute((4,), body, name="B")
    for value, dtype in ((1e10, "int32"), (-3.0, "uint32"), (2.0, "bool"), (1e30, "int32")):
        with pytest.raises(kiln.InvalidArgument, match="does not fit"):
            te.const(value, dtype)
    assert te.const(3.0, "int32").dtype == "i32"


def test_te_vectorized_guarded_reads_outside_the_buffer_are_named(device, rng):
    """A stencil's guarded read X[i - 1]: scalar (the select folds where i is a
    constant) it builds; vectorized with its first vector at i = 0, every lane
    is loaded, -1 included, which WGSL refuses as a constant index: the
    error says so and what to do."""
    n = 8
    X = te.placeholder((n,), "float32", name="X")
    C = te.compute((n,), lambda i: te.select(i > 0, X[i - 1], 0.0) + X[i], name="C")
    for vectorized in (False, True):
        s = te.create_schedule(C)
        c = s[C]
        o, v = c.split(c.axis[0], 4)
        c.unroll(o)
        if not vectorized:
            x = rng.standard_normal(n).astype(np.float32)
            y = kiln.tensor(np.full(n, np.nan, np.float32), device)
            kiln.build(s, [C], [X], "k", device=device)(kiln.tensor(x, device), y)
            np.testing.assert_allclose(y.numpy(), x + np.concatenate([[0], x[:-1]]), rtol=1e-6)
            continue
        c.vectorize(v)
        with pytest.raises(kiln.CompileError,
                           match=r"buffer 'X' is indexed at -1 \(`ramp\(-1, 1, 4\)`\).*a vectorized "
                                 r"load reads every lane, also those a select discards"):
            kiln.build(s, [C], [X], "k", device=device)
