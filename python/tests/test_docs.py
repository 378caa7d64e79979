"""The IR listings of docs/te.md are what lowering makes of their schedules
today: each schedule is built again here and its lowered text must appear in
the document verbatim."""
import pytest

from conftest import REPO
from kiln import te

TE_MD = (REPO / "docs" / "te.md").read_text()


def _in_doc(ir: str) -> None:
    text = ir.strip("\n")
    assert text in TE_MD, "docs/te.md lacks this listing (lowering changed?):\n" + text


def _twice(n):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return A, B, te.create_schedule(B)


def _vectorized_twice(n):
    A, B, s = _twice(n)
    io, ii = s[B].split(s[B].axis[0], 4)
    ioo, ioi = s[B].split(io, 32)
    s[B].bind(ioo, "blockIdx.x")
    s[B].bind(ioi, "threadIdx.x")
    s[B].vectorize(ii)
    return te.lower(s, [B], [A], "twice")


def test_vectorize_listing_and_its_constant_sizes():
    _in_doc(_vectorized_twice(te.size_var("n")))
    # "With n = 1024 no guard remains ...; with n = 1000 only ... < 250".
    ir = _vectorized_twice(1024)
    assert "if" not in ir and "threadIdx.x(0, 32) {\n      for i_inner in vectorize(0, 4)" in ir, ir
    ir = _vectorized_twice(1000)
    assert ir.count("if (") == 1 and "if (i_outer_outer * 32 + i_outer_inner < 250) {\n" \
        "        for i_inner in vectorize(0, 4)" in ir, ir
    # Strided lanes stay serial.
    A, B, s = _twice(10)
    io, ii = s[B].split(s[B].axis[0], 4)
    s[B].reorder(ii, io)
    s[B].vectorize(io)
    ir = te.lower(s, [B], [A], "twice")
    body = "\n".join(ir.strip("\n").splitlines()[1:-1])
    _in_doc(body)


def test_compute_inline_listing():
    n = te.size_var("n")
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: te.exp(B[i]), name="C")
    s = te.create_schedule(C)
    with pytest.raises(Exception) as refused:
        te.lower(s, [C], [A], "chain")
    quoted = str(refused.value).split(": ", 1)[-1]
    assert quoted.startswith("stage 'B' is read by 'C' but is neither inlined, computed at "
                             "another stage nor an output"), quoted
    assert quoted.split(" (")[0] in TE_MD.replace("\n", " ")
    s[B].compute_inline()
    _in_doc(te.lower(s, [C], [A], "chain"))


def test_shared_stencil_listing():
    n = te.size_var("n")
    A = te.placeholder((n + 2,), "float32", name="A")
    P = te.compute((n + 2,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n,), lambda i: P[i] + P[i + 1] + P[i + 2], name="C")
    s = te.create_schedule(C)
    io, ii = s[C].split(s[C].axis[0], 64)
    s[C].bind(io, "blockIdx.x")
    s[C].bind(ii, "threadIdx.x")
    s[P].set_scope("shared")
    s[P].compute_at(s[C], io)
    _, pi = s[P].split(s[P].axis[0], 64)
    s[P].bind(pi, "threadIdx.x")
    _in_doc(te.lower(s, [C], [A], "stencil"))


def test_register_tiled_double_buffered_matmul_listing():
    M, K, N = te.size_var("M"), te.size_var("K"), te.size_var("N")
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], k), name="C")
    s = te.create_schedule(C)
    AS = s.cache_read(A, "shared", C)
    BS = s.cache_read(B, "shared", C)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*s[C].axis, 32, 32)
    iio, iii = s[C].split(ii, 4)
    jio, jii = s[C].split(ji, 4)
    s[C].reorder(iio, jio, iii, jii)
    s[C].bind(io, "blockIdx.y")
    s[C].bind(jo, "blockIdx.x")
    s[C].bind(iio, "threadIdx.y")
    s[C].bind(jio, "threadIdx.x")
    s[CL].compute_at(s[C], jio)
    ci, cj = s[CL].axis
    ko, ki = s[CL].split(s[CL].reduce_axis[0], 8)
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].unroll(ci)
    s[CL].unroll(cj)
    for T in (AS, BS):
        s[T].compute_at(s[CL], ko)
        a0, a1 = s[T].axis
        s[T].storage_align(a0, 32, 1)
        s[T].double_buffer()
        _, fi = s[T].split(s[T].fuse(a0, a1), 64)
        fio, fii = s[T].split(fi, 8)
        s[T].bind(fio, "threadIdx.y")
        s[T].bind(fii, "threadIdx.x")
    _in_doc(te.lower(s, [C], [A, B], "matmul"))
