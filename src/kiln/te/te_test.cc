// Tensor expressions and schedules on the CPU: records, printing, replay,
// errors, and lowered functions that verify and compile.
#include "kiln/te/te.h"

#include <gtest/gtest.h>

#include <functional>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/verifier.h"
#include "kiln/te/te_test_kernels.h"

namespace kiln::te {
namespace {

// Whether `text` contains `part`, showing both when not.
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not in:\n" << text;
}

// C = A + b broadcast over rows.
struct AddRow {
  Var m = SizeVar("m"), n = SizeVar("n");
  Tensor A = Placeholder("A", {m, n}, ir::kF32);
  Tensor b = Placeholder("b", {n}, ir::kF32);
  Tensor C =
      Compute("C", {m, n}, [&](const std::vector<Var>& i) { return A(i[0], i[1]) + b(i[1]); });
};

using Matmul = testing::MatmulProgram;

TEST(TeTest, LowersUnscheduledComputeToSerialLoops) {
  AddRow p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok()) << s.status();
  auto f = Lower(*s, {p.C}, {p.A, p.b}, "add_row");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(ir::Print(*f),
            "fn add_row(A: buffer<f32>[m, n], b: buffer<f32>[n], C: buffer<f32>[m, n], m: i32, "
            "n: i32) {\n"
            "  for i in serial(0, m) {\n"
            "    for j in serial(0, n) {\n"
            "      C[i, j] = A[i, j] + b[j]\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(codegen::CompileFunction(*f).ok());
}

TEST(TeTest, SplitGuardsExtentsItDoesNotDivide) {
  AddRow p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  auto j = c.Split(c.axis(1), 64);
  ASSERT_TRUE(j.ok()) << j.status();
  ASSERT_TRUE(c.Bind(c.axis(0), ThreadAxis::kBlockY).ok());
  ASSERT_TRUE(c.Bind(j->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(c.Bind(j->inner, ThreadAxis::kThreadX).ok());
  auto f = Lower(*s, {p.C}, {p.A, p.b}, "add_row");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ir::Print(*f);
  EXPECT_TRUE(Contains(text, "for j_outer in blockIdx.x(0, (n + 63) / 64)"));
  EXPECT_TRUE(Contains(text, "let j: i32 = j_outer * 64 + j_inner"));
  EXPECT_TRUE(Contains(text, "if (j < n)"));
  EXPECT_TRUE(codegen::CompileFunction(*f).ok());

  // A constant extent the factor divides needs no guard.
  Tensor A = Placeholder("A", {128}, ir::kF32);
  Tensor B = Compute("B", {128}, [&](const std::vector<Var>& i) { return A(i[0]) * 2.0; });
  auto s2 = Schedule::Create({B});
  ASSERT_TRUE(s2.ok());
  ASSERT_TRUE((*s2)[B].Split((*s2)[B].axis(0), 32).ok());
  auto g = Lower(*s2, {B}, {A}, "twice");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(Contains(ir::Print(*g), "if ("));
}

TEST(TeTest, SchedulesPrintCompareAndReplay) {
  Matmul p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  auto i = c.Split(c.axis(0), 8);
  auto j = c.Split(c.axis(1), 8);
  ASSERT_TRUE(i.ok() && j.ok());
  ASSERT_TRUE(c.Reorder({i->outer, j->outer, i->inner, j->inner}).ok());
  ASSERT_TRUE(c.Bind(i->outer, ThreadAxis::kBlockY).ok());
  ASSERT_TRUE(c.Bind(j->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(c.Bind(i->inner, ThreadAxis::kThreadY).ok());
  ASSERT_TRUE(c.Bind(j->inner, ThreadAxis::kThreadX).ok());
  EXPECT_EQ(s->ToString(),
            "C.split(i, 8)\n"
            "C.split(j, 8)\n"
            "C.reorder(i_outer, j_outer, i_inner, j_inner)\n"
            "C.bind(i_outer, blockIdx.y)\n"
            "C.bind(j_outer, blockIdx.x)\n"
            "C.bind(i_inner, threadIdx.y)\n"
            "C.bind(j_inner, threadIdx.x)\n");

  // The same records applied to a fresh program give the same schedule and kernel.
  Matmul q;
  auto t = Schedule::Create({q.C});
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(*s == *t);
  ASSERT_TRUE(t->Apply(s->primitives()).ok());
  EXPECT_TRUE(*s == *t);
  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  auto g = Lower(*t, {q.C}, {q.A, q.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ir::Print(*f), ir::Print(*g));
  EXPECT_TRUE(codegen::CompileFunction(*f).ok());
}

TEST(TeTest, ReductionsAccumulateInALocal) {
  Matmul p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  auto k = c.Split(c.reduce_axis(0), 4);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_TRUE(c.Unroll(k->inner).ok());
  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ir::Print(*f);
  EXPECT_TRUE(Contains(text, "alloc C_acc: f32[1] local"));
  EXPECT_TRUE(Contains(text, "C_acc[0] = 0.0"));
  EXPECT_TRUE(Contains(text, "for k_inner in unroll(0, 4)"));
  EXPECT_TRUE(Contains(text, "if (k < K)"));
  EXPECT_TRUE(Contains(text, "C[i, j] = C_acc[0]"));
  EXPECT_TRUE(codegen::CompileFunction(*f).ok());
}

// A row maximum by Max tests for NaN at each step; by DeviceMax it is the
// IR's max, one call per element, from the same identity.
TEST(TeTest, DeviceMaxCombinesWithTheDevicesMax) {
  for (const bool device : {false, true}) {
    SCOPED_TRACE(device ? "DeviceMax" : "Max");
    Var n = SizeVar("n"), m = SizeVar("m");
    Tensor X = Placeholder("X", {n, m}, ir::kF32);
    IterVar k = ReduceAxis(m, "k");
    Tensor Y = Compute("Y", {n}, [&](const std::vector<Var>& i) {
      return device ? DeviceMax(X(i[0], k), {k}) : Max(X(i[0], k), {k});
    });
    auto s = Schedule::Create({Y});
    ASSERT_TRUE(s.ok()) << s.status();
    auto f = Lower(*s, {Y}, {X}, "row_max");
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = ir::Print(*f);
    EXPECT_TRUE(Contains(text, "Y_acc[0] = -inf")) << text;
    EXPECT_EQ(Contains(text, "Y_acc[0] = max(Y_acc[0], X[i, k])"), device) << text;
    EXPECT_EQ(Contains(text, "!="), !device) << text;
    EXPECT_TRUE(codegen::CompileFunction(*f).ok());
  }
  EXPECT_EQ(ReducerName(ReducerKind::kDeviceMin), "device_min");
  EXPECT_TRUE(ir::StructurallyEqual(ReducerIdentity(ReducerKind::kDeviceMin, ir::kI32),
                                    ReducerIdentity(ReducerKind::kMin, ir::kI32)));
}

TEST(TeTest, ComputeInlineSubstitutesTheProducer) {
  Var n = SizeVar("n");
  Tensor A = Placeholder("A", {n}, ir::kF32);
  Tensor B = Compute("B", {n}, [&](const std::vector<Var>& i) { return A(i[0]) * 2.0; });
  Tensor C = Compute("C", {n}, [&](const std::vector<Var>& i) { return B(i[0]) + 1.0; });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok());
  // Not inlined, B would have to be materialised.
  auto bad = Lower(*s, {C}, {A}, "chain");
  EXPECT_TRUE(Contains(bad.status().message(), "stage 'B' is read by 'C' but is neither"));
  ASSERT_TRUE((*s)[B].ComputeInline().ok());
  auto f = Lower(*s, {C}, {A}, "chain");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(Contains(ir::Print(*f), "C[i] = A[i] * 2.0 + 1.0"));
  EXPECT_EQ(s->ToString(), "B.compute_inline()\n");
}

// Each illegal use names the stage, the axis and the reason.
// A split into parts is recorded as the split by ceil(extent / parts).
TEST(TeTest, SplitIntoPartsIsASplitByItsFactor) {
  Tensor a = Placeholder("A", {9}, ir::kF32);
  Tensor b = Compute("B", {9}, [&](const std::vector<Var>& i) { return a(i[0]) * 2.0; });
  auto s = Schedule::Create({b});
  ASSERT_TRUE(s.ok());
  Stage st = (*s)[b];
  auto parts = st.SplitParts(st.axis(0), 4);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ(s->ToString(), "B.split(i, 3)\n");
  EXPECT_EQ(ir::AsConstInt(ir::Simplify(parts->outer.extent())), 3);
  EXPECT_EQ(ir::AsConstInt(ir::Simplify(parts->inner.extent())), 3);
  auto more = st.SplitParts(parts->inner, 8);  // more parts than elements: a split by 1
  ASSERT_TRUE(more.ok()) << more.status().message();
  EXPECT_EQ(ir::AsConstInt(ir::Simplify(more->inner.extent())), 1);
}

TEST(TeTest, IllegalPrimitivesAreErrors) {
  Matmul p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  auto expect_error = [](const Status& st, const std::string& text) {
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(Contains(st.message(), text));
  };
  expect_error(c.Split(c.axis(0), 0).status(),
               "split of stage 'C': axis 'i' split by 0; the factor must be positive");
  expect_error(c.Bind(c.reduce_axis(0), ThreadAxis::kThreadY),
               "bind of stage 'C': reduction axis 'k' cannot be bound to threadIdx.y; a "
               "reduction axis binds to threadIdx.x only");
  expect_error(c.Bind(c.reduce_axis(0), ThreadAxis::kThreadX),
               "bind of stage 'C': axis 'k' has extent K; binding it to threadIdx.x needs a "
               "constant extent");
  expect_error(c.Bind(c.axis(0), ThreadAxis::kThreadX),
               "bind of stage 'C': axis 'i' has extent M; binding it to threadIdx.x needs a "
               "constant extent");
  expect_error(c.Unroll(c.axis(1)), "unroll of stage 'C': axis 'j' has extent N");
  expect_error(c.Fuse(c.axis(1), c.reduce_axis(0)).status(),
               "fuse of stage 'C': axes 'j' and 'k' are not both");
  expect_error(c.Fuse(c.axis(0), c.reduce_axis(0)).status(),
               "fuse of stage 'C': axis 'i' must be directly outside 'k'");
  expect_error(c.ComputeInline(), "compute_inline of stage 'C': the stage is a reduction");
  expect_error(c.SplitParts(c.axis(0), 4).status(),
               "split of stage 'C': axis 'i' has the extent M, not a constant");
  expect_error(c.SplitParts(c.axis(0), 0).status(), "split into 0 parts");
  auto i = c.Split(c.axis(0), 16);
  ASSERT_TRUE(i.ok());
  expect_error(c.Split(c.axis(0), 4).status(),
               "split of stage 'C': axis 'i' is no longer a loop of the nest");
  ASSERT_TRUE(c.Bind(i->inner, ThreadAxis::kThreadX).ok());
  expect_error(c.Unroll(i->inner),
               "unroll of stage 'C': axis 'i_inner' is already bound to "
               "threadIdx.x");
  auto j = c.Split(c.axis(1), 8);
  ASSERT_TRUE(j.ok());
  expect_error(c.Bind(j->inner, ThreadAxis::kThreadX),
               "bind of stage 'C': threadIdx.x is already bound to axis 'i_inner'");
  // Failed primitives leave no record.
  EXPECT_EQ(s->ToString(), "C.split(i, 16)\nC.bind(i_inner, threadIdx.x)\nC.split(j, 8)\n");

  // Data loops inside reduction loops accumulate in place: only for a stage
  // whose value is the reduction itself.
  {
    Var rows = SizeVar("rows"), cols = SizeVar("cols");
    Tensor X = Placeholder("X", {rows, cols}, ir::kF32);
    IterVar r = ReduceAxis(cols, "r");
    Tensor Mean = Compute("Mean", {rows},
                          [&](const std::vector<Var>& i) { return Sum(X(i[0], r), {r}) / 4.0; });
    auto s3 = Schedule::Create({Mean});
    ASSERT_TRUE(s3.ok());
    Stage mean = (*s3)[Mean];
    expect_error(mean.Reorder({mean.reduce_axis(0), mean.axis(0)}),
                 "reorder of stage 'Mean': it would put reduction axis 'r' outside "
                 "data-parallel axis 'i'; only a stage whose value is its reduction itself "
                 "accumulates in place");
  }

  // An axis of another stage.
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n}, ir::kF32);
  Tensor Y = Compute("Y", {n}, [&](const std::vector<Var>& i) { return X(i[0]) * 2.0; });
  Tensor Z = Compute("Z", {n}, [&](const std::vector<Var>& i) { return Y(i[0]) + 1.0; }, {"z"});
  auto s2 = Schedule::Create({Z});
  ASSERT_TRUE(s2.ok());
  Stage y = (*s2)[Y], z = (*s2)[Z];
  expect_error(z.Reorder({y.axis(0)}), "reorder of stage 'Z': axis 'i' belongs to stage 'Y'");
  expect_error(z.Reorder({}), "reorder of stage 'Z': no axes to reorder");
  expect_error(z.ComputeInline(), "compute_inline of stage 'Z': the stage is an output");
  // The same launch axis bound with different extents in two stages.
  auto ys = y.Split(y.axis(0), 32);
  auto zs = z.Split(z.axis(0), 64);
  ASSERT_TRUE(ys.ok() && zs.ok());
  ASSERT_TRUE(y.Bind(ys->inner, ThreadAxis::kThreadX).ok());
  ASSERT_TRUE(z.Bind(zs->inner, ThreadAxis::kThreadX).ok());
  expect_error(y.ComputeInline(),
               "compute_inline of stage 'Y': the stage already has primitives applied; an inlined "
               "stage has no loops, memory or layout of its own");
  // As two kernels that is fine; in one kernel it is an error.
  EXPECT_TRUE(LowerKernels(*s2, {Z}, {X}, "two").ok());
  ASSERT_TRUE(y.ComputeAt(z, zs->outer).ok());
  expect_error(Lower(*s2, {Z}, {X}, "one").status(),
               "lowering 'one': stage 'Y' binds threadIdx.x with extent 32 but stage 'Z' of the "
               "same kernel with 64");
  // Replaying a record whose stage does not exist.
  expect_error(s2->Apply(Primitive{Primitive::Kind::kUnroll, "Q", {"i"}, 0, ""}),
               "unroll: the schedule has no stage named 'Q'");
}

TEST(TeTest, MalformedComputesAreReportedBySchedule) {
  Var n = SizeVar("n");
  Tensor A = Placeholder("A", {n, n}, ir::kF32);
  IterVar k = ReduceAxis(n, "k"), l = ReduceAxis(n, "l");
  Tensor B = Compute("B", {n}, [&](const std::vector<Var>& i) {
    return Sum(A(i[0], k), {k}) + Max(A(i[0], l), {l});
  });
  auto s = Schedule::Create({B});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.status().message(), "compute 'B': more than one reduction"));
}

// Type mistakes and constant indices outside a tensor are reported naming
// the compute, not from the lowered kernel.
TEST(TeTest, ComputesCheckTheirBodies) {
  Tensor A = Placeholder("A", {8}, ir::kI32);
  Tensor F = Placeholder("F", {4, 8}, ir::kF32);
  struct Case {
    std::function<Expr(const std::vector<Var>&)> body;
    std::string expected;
  };
  const Case cases[] = {
      {[&](const auto& i) { return ir::Call(ir::Intrinsic::kExp, {A(i[0])}); },
       "compute 'B': `A[i]` has type i32; expected a float (operand of exp)"},
      {[&](const auto& i) { return F(0, i[0]) + ir::Cast(ir::kF16, A(i[0])); },
       "compute 'B': operands of"},
      {[&](const auto& i) { return !F(1, i[0]); }, "compute 'B': `F[1, i]` has type f32"},
      {[&](const auto& i) { return F(4, i[0]); },
       "compute 'B' reads `F` at index 4 of dimension 0, outside its extent 4"},
      {[&](const auto& i) { return F(i[0] / 2, -1) * 2.0f; },
       "compute 'B' reads `F` at index -1 of dimension 1, below 0"},
  };
  for (const Case& c : cases) {
    Tensor B = Compute("B", {8}, c.body);
    auto s = Schedule::Create({B});
    ASSERT_FALSE(s.ok()) << c.expected;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s.status().message(), c.expected));
  }
  // The same reads inside the shape, and a reduction's source, are fine
  // until the source's type is wrong.
  IterVar k = ReduceAxis(8, "k");
  Tensor ok = Compute("ok", {4}, [&](const auto& i) { return Sum(F(3, k) + F(i[0], 7), {k}); });
  EXPECT_TRUE(Schedule::Create({ok}).ok());
  Tensor bad = Compute(
      "bad", {4}, [&](const auto& i) { return Sum(ir::Call(ir::Intrinsic::kSqrt, {A(k)}), {k}); });
  auto s = Schedule::Create({bad});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.status().message(), "compute 'bad': `A[k]` has type i32"));

  // An operand used twice, forty times over: 2^40 operations written out,
  // refused at once rather than expanded (the body and a reduction's source).
  auto doubled = [](Expr x) {
    for (int n = 0; n < 40; ++n) x = x + x;
    return x;
  };
  for (bool reduce : {false, true}) {
    Tensor big = Compute("big", {4}, [&](const auto& i) {
      return reduce ? Sum(doubled(F(i[0], k)), {k}) : doubled(F(i[0], 0));
    });
    auto b = Schedule::Create({big});
    ASSERT_FALSE(b.ok());
    EXPECT_TRUE(Contains(b.status().message(),
                         "compute 'big': the body holds more than 65536 operations written out"));
  }
  // Fourteen doublings of a load (a tree of 65535 operations) fit.
  Tensor fits = Compute("fits", {4}, [&](const auto& i) {
    Expr x = F(i[0], 0);
    for (int n = 0; n < 14; ++n) x = x + x;
    return x;
  });
  EXPECT_TRUE(Schedule::Create({fits}).ok());
}

TEST(TeTest, LoweringReportsMisuse) {
  // Too many threads per workgroup: the stages and axes, and the limit.
  AddRow p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  auto i = c.Split(c.axis(0), 32);
  auto j = c.Split(c.axis(1), 32);
  ASSERT_TRUE(i.ok() && j.ok());
  ASSERT_TRUE(c.Bind(i->inner, ThreadAxis::kThreadY).ok());
  ASSERT_TRUE(c.Bind(j->inner, ThreadAxis::kThreadX).ok());
  auto f = Lower(*s, {p.C}, {p.A, p.b}, "add_row");
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(Contains(f.status().message(),
                       "lowering 'add_row': the workgroup would have 1024 threads (threadIdx.x = "
                       "32 (stage 'C'), threadIdx.y = 32 (stage 'C')); the target allows 256"));

  // A placeholder read but not passed as an input.
  auto t = Schedule::Create({p.C});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(Contains(Lower(*t, {p.C}, {p.A}, "add_row").status().message(),
                       "placeholder 'b' is read but not an input"));

  // An index var of one compute used in another's body.
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n}, ir::kF32);
  Var leaked;
  Tensor Y = Compute("Y", {n}, [&](const std::vector<Var>& i) {
    leaked = i[0];
    return X(i[0]);
  });
  Tensor Z = Compute("Z", {n}, [&](const std::vector<Var>& i) { return Y(i[0]) + X(leaked); });
  // Refused with the definition, before any schedule.
  EXPECT_EQ(Schedule::Create({Z}).status().message(),
            "compute 'Z': axis 'i' is neither an axis of 'Z' nor one its reduction takes (an axis "
            "of another compute, or a reduction axis that no reduction in this body reduces "
            "over)");
}

// Axes a definition may not use, a reduction axis listed twice, and a
// reduction inside a reducer's combine function are refused with the
// definition rather than becoming scalar parameters of the kernel.
TEST(TeTest, ForeignAxesAndMalformedReductionsAreRefused) {
  Tensor A = Placeholder("A", {8}, ir::kF32);
  IterVar k = ReduceAxis(8, "k"), k2 = ReduceAxis(8, "k2");
  auto refused = [](const Tensor& t, const std::string& message) {
    auto s = Schedule::Create({t});
    EXPECT_FALSE(s.ok()) << message;
    EXPECT_TRUE(Contains(s.status().message(), message)) << s.status();
  };
  refused(Compute("B", {8}, [&](const std::vector<Var>&) { return A(k.var()); }),
          "compute 'B': axis 'k' is neither an axis of 'B' nor one its reduction takes");
  refused(Compute("C", {8}, [&](const std::vector<Var>&) { return Sum(A(k.var()), {k2}); }),
          "compute 'C': axis 'k' is neither an axis of 'C'");
  refused(Compute("D", {8},
                  [&](const std::vector<Var>&) {
                    return Sum(A(k.var()) * 2.0, {k, k});
                  }),
          "compute 'D': reduction axis 'k' is listed twice in its sum");
  // A size var is a scalar parameter, as documented.
  Var n = SizeVar("n");
  Tensor E =
      Compute("E", {8}, [&](const std::vector<Var>& i) { return A(i[0]) * ir::Cast(ir::kF32, n); });
  EXPECT_TRUE(Schedule::Create({E}).ok());
  // A size var named like a tensor (or like another size var): the kernel's
  // parameters would share a name.
  Var clash = SizeVar("A");
  Tensor F = Compute(
      "F", {8}, [&](const std::vector<Var>& i) { return A(i[0]) * ir::Cast(ir::kF32, clash); });
  auto s = Schedule::Create({F});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Lower(*s, {F}, {A}, "f").status().message(),
            "lowering 'f': size var 'A' has the name of tensor 'A'; the kernel's parameters take "
            "their names, which must differ");
}

TEST(TeTest, FuseMakesOneLoop) {
  AddRow p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  auto fused = c.Fuse(c.axis(0), c.axis(1));
  ASSERT_TRUE(fused.ok()) << fused.status();
  auto parts = c.Split(*fused, 128);
  ASSERT_TRUE(parts.ok());
  ASSERT_TRUE(c.Bind(parts->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(c.Bind(parts->inner, ThreadAxis::kThreadX).ok());
  auto f = Lower(*s, {p.C}, {p.A, p.b}, "add_row");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ir::Print(*f);
  EXPECT_TRUE(Contains(text, "let i: i32 = (i_j_fused_outer * 128 + i_j_fused_inner) / n"));
  EXPECT_TRUE(Contains(text, "if (i_j_fused_outer * 128 + i_j_fused_inner < m * n)"));
  EXPECT_TRUE(codegen::CompileFunction(*f).ok());
}

// B = A * 2 over n elements: four lanes per thread, 32 threads per block.
struct Twice {
  explicit Twice(const Expr& n) : A(Placeholder("A", {n}, ir::kF32)) {
    B = Compute("B", {n}, [&](const std::vector<Var>& i) { return A(i[0]) * 2.0; });
  }
  Tensor A, B;
};

StatusOr<ir::Function> LowerVectorized(Schedule& s, const Twice& p) {
  Stage b = s[p.B];
  KILN_ASSIGN_OR_RETURN(SplitResult lanes, b.Split(b.axis(0), 4));
  KILN_ASSIGN_OR_RETURN(SplitResult parts, b.Split(lanes.outer, 32));
  KILN_RETURN_IF_ERROR(b.Bind(parts.outer, ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(b.Bind(parts.inner, ThreadAxis::kThreadX));
  KILN_RETURN_IF_ERROR(b.Vectorize(lanes.inner));
  return Lower(s, {p.B}, {p.A}, "twice");
}

TEST(TeTest, VectorizeWithoutTailIsOneVectorLoop) {
  Twice p(ir::IntConst(ir::kI32, 1024));
  auto s = Schedule::Create({p.B});
  ASSERT_TRUE(s.ok());
  auto f = LowerVectorized(*s, p);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(ir::Print(*f),
            "fn twice(A: buffer<f32>[1024], B: buffer<f32>[1024]) {\n"
            "  for i_outer_outer in blockIdx.x(0, 8) {\n"
            "    for i_outer_inner in threadIdx.x(0, 32) {\n"
            "      for i_inner in vectorize(0, 4) {\n"
            "        let i: i32 = (i_outer_outer * 32 + i_outer_inner) * 4 + i_inner\n"
            "        B[i] = A[i] * 2.0\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(s->ToString(),
            "B.split(i, 4)\nB.split(i_outer, 32)\nB.bind(i_outer_outer, blockIdx.x)\n"
            "B.bind(i_outer_inner, threadIdx.x)\nB.vectorize(i_inner)\n");
  auto wgsl = codegen::CompileFunction(*f);
  ASSERT_TRUE(wgsl.ok()) << wgsl.status();
  EXPECT_TRUE(Contains(wgsl->wgsl, "vec4<f32>"));

  // 4 divides 1000 but 32 does not divide 250: the guard does not depend on
  // the lane and surrounds the vector loop.
  Twice q(ir::IntConst(ir::kI32, 1000));
  auto t = Schedule::Create({q.B});
  ASSERT_TRUE(t.ok());
  auto g = LowerVectorized(*t, q);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ir::Print(*g),
            "fn twice(A: buffer<f32>[1000], B: buffer<f32>[1000]) {\n"
            "  for i_outer_outer in blockIdx.x(0, 8) {\n"
            "    for i_outer_inner in threadIdx.x(0, 32) {\n"
            "      if (i_outer_outer * 32 + i_outer_inner < 250) {\n"
            "        for i_inner in vectorize(0, 4) {\n"
            "          let i: i32 = (i_outer_outer * 32 + i_outer_inner) * 4 + i_inner\n"
            "          B[i] = A[i] * 2.0\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(codegen::CompileFunction(*g).ok());
}

TEST(TeTest, VectorizeWithTailRunsTheLastLanesOneByOne) {
  Var n = SizeVar("n");
  Twice p(n);
  auto s = Schedule::Create({p.B});
  ASSERT_TRUE(s.ok());
  auto f = LowerVectorized(*s, p);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(ir::Print(*f),
            "fn twice(A: buffer<f32>[n], B: buffer<f32>[n], n: i32) {\n"
            "  for i_outer_outer in blockIdx.x(0, ((n + 3) / 4 + 31) / 32) {\n"
            "    for i_outer_inner in threadIdx.x(0, 32) {\n"
            "      if ((i_outer_outer * 32 + i_outer_inner) * 4 + 3 < n && i_outer_outer * 32 + "
            "i_outer_inner < (n + 3) / 4) {\n"
            "        for i_inner in vectorize(0, 4) {\n"
            "          let i: i32 = (i_outer_outer * 32 + i_outer_inner) * 4 + i_inner\n"
            "          B[i] = A[i] * 2.0\n"
            "        }\n"
            "      } else {\n"
            "        for i_inner_1 in serial(0, 4) {\n"
            "          let i_1: i32 = (i_outer_outer * 32 + i_outer_inner) * 4 + i_inner_1\n"
            "          if (i_1 < n && i_outer_outer * 32 + i_outer_inner < (n + 3) / 4) {\n"
            "            B[i_1] = A[i_1] * 2.0\n"
            "          }\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(ir::Verify(*f).ok());
  auto wgsl = codegen::CompileFunction(*f);
  ASSERT_TRUE(wgsl.ok()) << wgsl.status();
  EXPECT_TRUE(Contains(wgsl->wgsl, "vec4<f32>"));
}

// Fused axes keep contiguous lanes contiguous where the lane count divides
// the inner extent: the column is a ramp, the row a scalar.
TEST(TeTest, VectorizeThroughAFuseKeepsLanesContiguous) {
  Var m = SizeVar("m");
  Tensor A = Placeholder("A", {m, 12}, ir::kF32);
  Tensor b = Placeholder("b", {12}, ir::kF32);
  Tensor C =
      Compute("C", {m, 12}, [&](const std::vector<Var>& i) { return A(i[0], i[1]) + b(i[1]); });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[C];
  auto fused = c.Fuse(c.axis(0), c.axis(1));
  ASSERT_TRUE(fused.ok());
  auto lanes = c.Split(*fused, 4);
  ASSERT_TRUE(lanes.ok());
  ASSERT_TRUE(c.Bind(lanes->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(c.Vectorize(lanes->inner).ok());
  auto f = Lower(*s, {C}, {A, b}, "add_row");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ir::Print(*f);
  EXPECT_TRUE(Contains(text, "for i_j_fused_inner in vectorize(0, 4)"));
  EXPECT_TRUE(Contains(text, "let i: i32 = i_j_fused_outer * 4 / 12"));
  EXPECT_TRUE(Contains(text, "let j: i32 = i_j_fused_outer * 4 % 12 + i_j_fused_inner"));
  EXPECT_TRUE(Contains(text, "} else {")) << "m * 12 is not known to divide by 4 here";
  auto wgsl = codegen::CompileFunction(*f);
  ASSERT_TRUE(wgsl.ok()) << wgsl.status();
  EXPECT_TRUE(Contains(wgsl->wgsl, "vec4<f32>"));
}

// Where the lane enters a guarded index with a coefficient other than 1, the
// lanes run as a guarded serial loop.
TEST(TeTest, VectorizeFallsBackToSerialLanesForOtherGuards) {
  Twice p(ir::IntConst(ir::kI32, 10));
  auto s = Schedule::Create({p.B});
  ASSERT_TRUE(s.ok());
  Stage b = (*s)[p.B];
  auto parts = b.Split(b.axis(0), 4);
  ASSERT_TRUE(parts.ok());
  ASSERT_TRUE(b.Reorder({parts->inner, parts->outer}).ok());
  ASSERT_TRUE(b.Vectorize(parts->outer).ok());
  auto f = Lower(*s, {p.B}, {p.A}, "twice");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(ir::Print(*f),
            "fn twice(A: buffer<f32>[10], B: buffer<f32>[10]) {\n"
            "  for i_inner in serial(0, 4) {\n"
            "    for i_outer in serial(0, 3) {\n"
            "      let i: i32 = i_outer * 4 + i_inner\n"
            "      if (i < 10) {\n"
            "        B[i] = A[i] * 2.0\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(TeTest, VectorizeRecordsReplay) {
  Var n = SizeVar("n");
  Twice p(n);
  auto s = Schedule::Create({p.B});
  ASSERT_TRUE(s.ok());
  auto f = LowerVectorized(*s, p);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(s->primitives().back().ToString(), "B.vectorize(i_inner)");
  auto t = Schedule::Create({p.B});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t->Apply(s->primitives()).ok());
  EXPECT_TRUE(*s == *t);
  auto g = Lower(*t, {p.B}, {p.A}, "twice");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(ir::Print(*f), ir::Print(*g));
  // A different axis is a different record.
  Primitive other = s->primitives().back();
  other.axes = {"i_outer_inner"};
  EXPECT_FALSE(other == s->primitives().back());
}

TEST(TeTest, IllegalVectorizeIsAnError) {
  auto expect_error = [](const Status& st, const std::string& text) {
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(Contains(st.message(), text));
  };
  {
    Matmul p;
    auto s = Schedule::Create({p.C});
    ASSERT_TRUE(s.ok());
    Stage c = (*s)[p.C];
    expect_error(c.Vectorize(c.reduce_axis(0)),
                 "vectorize of stage 'C': reduction axis 'k' cannot be vectorized");
    // A reduction's data axis vectorizes only inside every reduction loop
    // (accumulated in place); here k runs inside it.
    auto j = c.Split(c.axis(1), 4);
    ASSERT_TRUE(j.ok());
    ASSERT_TRUE(c.Vectorize(j->inner).ok());
    auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
    ASSERT_FALSE(f.ok());
    EXPECT_TRUE(Contains(f.status().message(),
                         "stage 'C' is a reduction and vectorizes axis 'j_inner': a reduction's "
                         "data axis vectorizes only as its innermost loop"))
        << f.status();
  }
  AddRow p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  expect_error(c.Vectorize(c.axis(1)),
               "vectorize of stage 'C': axis 'j' has extent n; only axes of constant extent");
  auto j = c.Split(c.axis(1), 8);
  ASSERT_TRUE(j.ok());
  expect_error(c.Vectorize(c.axis(1)),
               "vectorize of stage 'C': axis 'j' is no longer a loop of the nest");
  expect_error(c.Vectorize(j->inner),
               "vectorize of stage 'C': axis 'j_inner' has extent 8; a vectorized axis needs "
               "extent 2, 3 or 4");
  auto k = c.Split(j->inner, 4);
  ASSERT_TRUE(k.ok());
  auto i = c.Split(c.axis(0), 2);
  ASSERT_TRUE(i.ok());
  expect_error(c.Vectorize(i->inner),
               "vectorize of stage 'C': axis 'i_inner' is not the innermost data-parallel loop "
               "(axis 'j_outer' is inside it)");
  ASSERT_TRUE(c.Bind(k->inner, ThreadAxis::kThreadX).ok());
  expect_error(c.Vectorize(k->inner),
               "vectorize of stage 'C': axis 'j_inner_inner' is already bound to threadIdx.x");
  ASSERT_TRUE(c.Unroll(k->outer).ok());
  expect_error(c.Vectorize(k->outer),
               "vectorize of stage 'C': axis 'j_inner_outer' is already unrolled");

  auto t = Schedule::Create({p.C});
  ASSERT_TRUE(t.ok());
  Stage d = (*t)[p.C];
  auto l = d.Split(d.axis(1), 4);
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE(d.Vectorize(l->inner).ok());
  expect_error(d.Vectorize(l->inner),
               "vectorize of stage 'C': axis 'j_inner' is already vectorized");
  expect_error(d.Unroll(l->inner), "unroll of stage 'C': axis 'j_inner' is already vectorized");
  expect_error(d.Split(l->inner, 2).status(),
               "split of stage 'C': axis 'j_inner' is already vectorized");
  expect_error(d.Bind(l->inner, ThreadAxis::kThreadX),
               "bind of stage 'C': axis 'j_inner' is already vectorized");
  expect_error(d.Reorder({l->inner, l->outer}),
               "reorder of stage 'C': it would put data-parallel axis 'j_outer' inside "
               "vectorized axis 'j_inner'");
  EXPECT_EQ(t->ToString(), "C.split(j, 4)\nC.vectorize(j_inner)\n");

  // An inlined stage has no loops to vectorize.
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n}, ir::kF32);
  Tensor Y = Compute("Y", {n}, [&](const std::vector<Var>& i) { return X(i[0]) * 2.0; });
  Tensor Z = Compute("Z", {n}, [&](const std::vector<Var>& i) { return Y(i[0]) + 1.0; });
  auto u = Schedule::Create({Z});
  ASSERT_TRUE(u.ok());
  ASSERT_TRUE((*u)[Y].ComputeInline().ok());
  expect_error((*u)[Y].Vectorize((*u)[Y].axis(0)), "vectorize of stage 'Y': the stage is inlined");
  // A replayed record naming an unknown axis.
  expect_error(u->Apply(Primitive{Primitive::Kind::kVectorize, "Z", {"q"}, 0, ""}),
               "vectorize of stage 'Z': the stage has no axis 'q'");
}

}  // namespace
}  // namespace kiln::te

namespace kiln::te {
namespace {

// A compute whose affine read reaches past its tensor (or below 0) for
// some point of its domain is an error for every schedule; guarded reads
// (under a select or if_then_else) and reads in bounds are not.
TEST(TeTest, DefinitionsReadingOutOfBoundsAreErrors) {
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n}, ir::kF32);
  Tensor C8 = Placeholder("C8", {8, 4}, ir::kF32);
  auto error = [](const Tensor& t) {
    StatusOr<Schedule> s = Schedule::Create({t});
    return s.ok() ? std::string() : s.status().message();
  };
  EXPECT_EQ(error(Compute("Z", {n}, [&](const std::vector<Var>& i) { return X(i[0] + 1); })),
            "compute 'Z' reads 'X' out of bounds: index 0 (i + 1) runs over [1, n], and "
            "dimension 0 of 'X' has extent n");
  EXPECT_EQ(error(Compute("L", {n}, [&](const std::vector<Var>& i) { return X(i[0] - 1); })),
            "compute 'L' reads 'X' out of bounds: index 0 (i - 1) runs over [-1, n - 2], and "
            "dimension 0 of 'X' has extent n");
  IterVar k = ReduceAxis(5, "k");
  EXPECT_EQ(
      error(Compute("S", {8}, [&](const std::vector<Var>& i) { return Sum(C8(i[0], k), {k}); })),
      "compute 'S' reads 'C8' out of bounds: index 1 (k) runs over [0, 4], and dimension "
      "1 of 'C8' has extent 4");
  // In bounds, guarded, or not affine: accepted.
  EXPECT_EQ(error(Compute("A", {n - 1}, [&](const std::vector<Var>& i) { return X(i[0] + 1); })),
            "");
  EXPECT_EQ(error(Compute("G", {n},
                          [&](const std::vector<Var>& i) {
                            return ir::Select(i[0] + 1 < n, X(i[0] + 1),
                                              ir::FloatConst(ir::kF32, 0));
                          })),
            "");
  EXPECT_EQ(error(Compute("M", {n}, [&](const std::vector<Var>& i) { return X(i[0] % 3); })), "");
  EXPECT_EQ(error(Compute("T", {4, 8}, [&](const std::vector<Var>& i) { return C8(i[1], i[0]); })),
            "");
}

// A stage handle follows its schedule's state through moves and
// assignments.
TEST(TeTest, StagesSurviveMovingAndAssigningTheirSchedule) {
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n}, ir::kF32);
  Tensor Y = Compute("Y", {n}, [&](const std::vector<Var>& i) { return X(i[0]) * 2.0; });
  auto made = Schedule::Create({Y});
  ASSERT_TRUE(made.ok()) << made.status();
  Stage y = (*made)[Y];
  Schedule moved = std::move(*made);
  ASSERT_TRUE(y.Split(y.axis(0), 4).ok());
  EXPECT_EQ(moved.primitives().size(), 1u);
  Schedule assigned = *Schedule::Create({Y});
  Stage ya = assigned[Y];
  assigned = moved;  // a copy: `ya` now sees the split too
  EXPECT_EQ(ya.leaf_axes().size(), 2u);
  Schedule other = *Schedule::Create({Y});
  other = std::move(assigned);  // `ya` follows the state into `other`
  ASSERT_TRUE(ya.Unroll(ya.leaf_axes()[1]).ok());
  EXPECT_EQ(other.primitives().size(), 2u);
  EXPECT_EQ(moved.primitives().size(), 1u);  // the copy is its own
  // A schedule moved from takes a copy again.
  Schedule source = *Schedule::Create({Y});
  Schedule target = std::move(source);
  source = moved;
  EXPECT_EQ(source.primitives().size(), 1u);
  EXPECT_EQ(target.primitives().size(), 0u);
}

// Memory scopes and padding belong to stages computed at a loop: on a stage
// of its own they are refused when lowering, not ignored.
TEST(TeTest, ScopeAndAlignmentOfAStageOfItsOwnAreRefused) {
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n, n}, ir::kF32);
  Tensor Y = Compute("Y", {n, n}, [&](const std::vector<Var>& i) { return X(i[0], i[1]) * 2.0; });
  Tensor Z = Compute("Z", {n, n}, [&](const std::vector<Var>& i) { return Y(i[0], i[1]) + 1.0; });
  for (bool scope : {true, false}) {
    auto s = Schedule::Create({Z});
    ASSERT_TRUE(s.ok()) << s.status();
    Stage y = (*s)[Y];
    if (scope) {
      ASSERT_TRUE(y.SetScope(ir::MemoryScope::kShared).ok());
    } else {
      ASSERT_TRUE(y.StorageAlign(y.axis(0), 32, 1).ok());
    }
    auto lowered = LowerKernels(*s, {Z}, {X}, "k");
    EXPECT_EQ(lowered.status().message(),
              std::string("lowering 'k': stage 'Y' has ") +
                  (scope ? "shared memory (set_scope)" : "a storage_align") +
                  " but is not computed at another stage's loop (compute_at), so it would be a "
                  "kernel of its own writing global memory");
  }
  // A cache stage left where cache_read put it says so.
  auto s = Schedule::Create({Z});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->CacheRead(X, ir::MemoryScope::kShared, {Y}).ok());
  EXPECT_EQ(LowerKernels(*s, {Z}, {X}, "k").status().message(),
            "lowering 'k': stage 'X_shared' has shared memory (a cache stage of cache_read or "
            "cache_write) but is not computed at another stage's loop (compute_at), so it would "
            "be a kernel of its own writing global memory");
}

}  // namespace
}  // namespace kiln::te
