// Random schedules against the unscheduled program, in the interpreter.
//
// Every case draws primitives at random for one of the small programs of
// te_random_schedules.h and applies them one by one. A rejected primitive
// must leave the schedule exactly as it was and say why; the schedule must
// replay on a fresh Schedule to an equal one; and where the result lowers,
// it must verify, generate WGSL and compute, on random inputs with the
// outputs poisoned, what the unscheduled program computes.
//
// KILN_TE_FUZZ_CASES sets the number of cases (default 3000) and
// KILN_TE_FUZZ_SEED the first case's seed, for longer runs by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/te/te_random_schedules.h"

namespace kiln::te {
namespace {

using testing::FuzzProgram;
using testing::HostBuffers;

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::atoll(v);
}

// The kernels of a schedule (one per root stage).
StatusOr<std::vector<ir::Function>> LowerAll(const Schedule& s, const FuzzProgram& p) {
  KILN_ASSIGN_OR_RETURN(Kernels k, LowerKernels(s, p.outputs, p.inputs, "fuzz"));
  return k.functions;
}

std::string Dump(const std::vector<ir::Function>& functions) {
  std::string out;
  for (const ir::Function& f : functions) out += ir::Print(f);
  return out;
}

// Whether `got` matches `want` on every output of `p`: floats within
// 1e-4 * (1 + |want|) or equal (NaN equal to NaN, infinities to themselves),
// integers exactly.
::testing::AssertionResult SameOutputs(const FuzzProgram& p, const HostBuffers& want,
                                       const HostBuffers& got) {
  for (const Tensor& out : p.outputs) {
    const interp::HostBuffer& w = want.at(out.name());
    const interp::HostBuffer& g = got.at(out.name());
    for (int64_t i = 0; i < w.num_elements(); ++i) {
      if (out.dtype() == ir::kF32) {
        const float a = w.At<float>(i), b = g.At<float>(i);
        if (a == b || (std::isnan(a) && std::isnan(b)) ||
            std::fabs(a - b) <= 1e-4 * (1 + std::fabs(a))) {
          continue;
        }
        return ::testing::AssertionFailure()
               << out.name() << "[" << i << "] is " << b << ", want " << a;
      }
      if (w.At<int32_t>(i) != g.At<int32_t>(i)) {
        return ::testing::AssertionFailure() << out.name() << "[" << i << "] is "
                                             << g.At<int32_t>(i) << ", want " << w.At<int32_t>(i);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Checks kernels lowered from a schedule of `p`: each verifies and
// generates WGSL (or is refused with an argument error naming it), and in
// the interpreter they compute what the unscheduled program computes, on
// inputs drawn from `seed`. Sets `compiled` to whether every kernel
// generated WGSL (nothing ran otherwise).
void ExpectSameAsUnscheduled(const FuzzProgram& p, const std::vector<ir::Function>& kernels,
                             uint64_t seed, bool& compiled) {
  compiled = true;
  for (const ir::Function& f : kernels) {
    const Status verified = ir::Verify(f);
    ASSERT_TRUE(verified.ok()) << verified;
    // The code generator may refuse what WGSL cannot hold (an unrolled
    // loop past its limit): an argument error, never an internal one.
    auto wgsl = codegen::CompileFunction(f);
    if (!wgsl.ok()) {
      ASSERT_EQ(wgsl.status().code(), StatusCode::kInvalidArgument) << wgsl.status();
      ASSERT_NE(wgsl.status().message().find(f.name()), std::string::npos) << wgsl.status();
      compiled = false;
    }
  }
  if (!compiled) return;
  auto plain_schedule = Schedule::Create(p.outputs);
  ASSERT_TRUE(plain_schedule.ok());
  auto plain = LowerAll(*plain_schedule, p);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto inputs = testing::RandomInputs(*plain, p, seed);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  HostBuffers want = *inputs, got = *inputs;
  const Status ran_plain = testing::RunInInterpreter(*plain, p, want);
  ASSERT_TRUE(ran_plain.ok()) << ran_plain;
  const Status ran = testing::RunInInterpreter(kernels, p, got);
  ASSERT_TRUE(ran.ok()) << ran;
  ASSERT_TRUE(SameOutputs(p, want, got));
}

// Schedules the random cases found wrong once, each kept as a regression:
// they lower to kernels that compute the right values, or are errors.
TEST(TeFuzzTest, SchedulesOnceWrongAreRightOrErrors) {
  using K = Primitive::Kind;
  struct Case {
    int program;
    std::vector<Primitive> records;
    // Empty: lowers and computes the program; else a fragment of the
    // lowering's error, or with "APPLY:" of the error applying the records.
    std::string error;
  };
  const std::vector<Case> cases = {
      // A local stage bound to threads its consumer does not bind.
      {4,
       {{K::kSplit, "B", {"i"}, 4},
        {K::kComputeAt, "B", {"i"}, 0, "", "C"},
        {K::kBind, "C", {"i"}, 0, "blockIdx.y"},
        {K::kBind, "B", {"i_inner"}, 0, "threadIdx.y"}},
       "a local stage is one copy per thread"},
      // An attached stage bound to a workgroup axis its consumer binds.
      {4,
       {{K::kSplit, "C", {"i"}, 8},
        {K::kBind, "C", {"i_outer"}, 0, "blockIdx.x"},
        {K::kBind, "C", {"i_inner"}, 0, "threadIdx.x"},
        {K::kSplit, "B", {"i"}, 5},
        {K::kBind, "B", {"i_inner"}, 0, "blockIdx.x"},
        {K::kComputeAt, "B", {"i_inner"}, 0, "", "C"}},
       "cannot bind a workgroup axis"},
      // A compute_at inside a fuse of symbolic extents (was a crash).
      {1,
       {{K::kFuse, "C", {"i", "j"}},
        {K::kSplit, "C", {"i_j_fused"}, 3},
        {K::kSplit, "C", {"i_j_fused_inner"}, 2},
        {K::kCacheRead, "B", {"C"}, 0, "", "", "shared"},
        {K::kComputeAt, "B_shared", {"i_j_fused_inner_outer"}, 0, "", "C"}},
       "cannot bound axis 'i' of stage 'C'"},
      // A cross-thread reduction computed at another stage's loop.
      {7,
       {{K::kComputeAt, "S", {"j"}, 0, "", "Y"},
        {K::kBind, "S", {"i"}, 0, "threadIdx.y"},
        {K::kSetScope, "S", {}, 0, "", "", "shared"},
        {K::kBind, "S", {"k"}, 0, "threadIdx.x"}},
       ""},
      // A reduction accumulated in place, double-buffered, then copied ahead.
      {2,
       {{K::kCacheWrite, "C", {}, 0, "", "", "shared"},
        {K::kBind, "C", {"i"}, 0, "blockIdx.x"},
        {K::kReorder, "C", {"j", "i"}},
        {K::kComputeAt, "C_shared", {"j"}, 0, "", "C"},
        {K::kDoubleBuffer, "C_shared"},
        {K::kReorder, "C_shared", {"k", "i", "j"}}},
       "is double-buffered but is a reduction"},
      {2,
       {{K::kCacheWrite, "C", {}, 0, "", "", "shared"},
        {K::kBind, "C", {"i"}, 0, "blockIdx.x"},
        {K::kReorder, "C", {"j", "i"}},
        {K::kComputeAt, "C_shared", {"j"}, 0, "", "C"},
        {K::kCopyAhead, "C_shared"},
        {K::kReorder, "C_shared", {"k", "i", "j"}}},
       ""},
      // A local stage read at strided positions by an rfactor stage computed
      // at a thread loop (the compact storage's origin was wrong).
      {10,
       {{K::kSplit, "Y", {"k"}, 4},
        {K::kRfactor, "Y", {"k_inner"}},
        {K::kBind, "Y", {"i"}, 0, "blockIdx.x"},
        {K::kBind, "Y", {"k_inner_r"}, 0, "threadIdx.x"},
        {K::kComputeAt, "Y_rf", {"k_inner_r"}, 0, "", "Y"},
        {K::kCacheRead, "X", {"Y_rf"}, 0, "", "", "local"},
        {K::kSplit, "X_local", {"i"}, 64},
        {K::kComputeAt, "X_local", {"i"}, 0, "", "Y_rf"},
        {K::kSplit, "X_local", {"j"}, 4}},
       ""},
      // A serial reduction with a shared stage at its loop, its data axis
      // split over threads by a factor that does not divide it (the guard
      // held the barriers).
      {16,
       {{K::kSplit, "P", {"i"}, 32},
        {K::kBind, "P", {"i_outer"}, 0, "blockIdx.x"},
        {K::kBind, "P", {"i_inner"}, 0, "threadIdx.x"},
        {K::kSplit, "P", {"k"}, 4},
        {K::kCacheRead, "X", {"P"}, 0, "", "", "shared"},
        {K::kComputeAt, "X_shared", {"k_outer"}, 0, "", "P"}},
       ""},
      // A cache_read for the reader a stage is computed at (the stage was
      // left where nothing read it).
      {3,
       {{K::kComputeAt, "B", {"i"}, 0, "", "C"},
        {K::kSetScope, "B", {}, 0, "", "", "shared"},
        {K::kCacheRead, "B", {"C"}, 0, "", "", "shared"}},
       "APPLY:is computed at stage 'C', which would read the cache instead"},
      // A stage computed at the loop its consumer then vectorizes (the
      // stage's computation was dropped with the loop).
      {3,
       {{K::kSplit, "C", {"i"}, 2},
        {K::kBind, "C", {"i_outer"}, 0, "blockIdx.x"},
        {K::kBind, "C", {"i_inner"}, 0, "threadIdx.x"},
        {K::kSplit, "B", {"i"}, 64},
        {K::kSplit, "C", {"j"}, 4},
        {K::kComputeAt, "B", {"j_inner"}, 0, "", "C"},
        {K::kVectorize, "C", {"j_inner"}}},
       "APPLY:stage 'B' is computed at loop 'j_inner'; a stage cannot be computed inside a vector "
       "loop"},
      {9,
       {{K::kReorder, "P", {"i"}},
        {K::kSplit, "C", {"i"}, 4},
        {K::kComputeAt, "P", {"i_inner"}, 0, "", "C"},
        {K::kSplit, "C", {"i_outer"}, 8},
        {K::kVectorize, "C", {"i_inner"}}},
       "APPLY:stage 'P' is computed at loop 'i_inner'"},
      // A local stage whose region and padding exceed what a local buffer
      // holds (lowered to a function the verifier refused).
      {14,
       {{K::kSplit, "C", {"i"}, 64},
        {K::kBind, "C", {"i_outer"}, 0, "blockIdx.x"},
        {K::kBind, "C", {"i_inner"}, 0, "threadIdx.x"},
        {K::kSplit, "C", {"j"}, 64},
        {K::kComputeAt, "B", {"i_inner"}, 0, "", "C"},
        {K::kSplit, "C", {"j_outer"}, 16},
        {K::kSplit, "C", {"j_inner"}, 8},
        {K::kSplit, "C", {"j_outer_inner"}, 8},
        {K::kStorageAlign, "B", {"j"}, 32}},
       "local buffer 'B_buf' would hold 65569 elements"},
      {3,
       {{K::kSplit, "C", {"i"}, 32},
        {K::kBind, "C", {"i_outer"}, 0, "blockIdx.x"},
        {K::kBind, "C", {"i_inner"}, 0, "threadIdx.x"},
        {K::kFuse, "B", {"i", "j"}},
        {K::kComputeAt, "B", {"i_outer"}, 0, "", "C"},
        {K::kStorageAlign, "B", {"j"}, 16},
        {K::kSplit, "C", {"j"}, 16},
        {K::kSplit, "C", {"j_outer"}, 32},
        {K::kReorder, "C", {"j_inner", "i_inner"}}},
       "local buffer 'B_buf' would hold"},
      // A vectorized axis whose region at the consumer's loop is one lane
      // (lowered to a vector loop of extent 1).
      {11,
       {{K::kSplit, "C", {"i2"}, 2},
        {K::kVectorize, "C", {"i2_inner"}},
        {K::kUnroll, "C", {"i2_outer"}},
        {K::kCacheRead, "A", {"C"}, 0, "", "", "local"},
        {K::kComputeAt, "A_local", {"i1"}, 0, "", "C"},
        {K::kReorder, "A_local", {"i1", "i2", "i0"}},
        {K::kVectorize, "A_local", {"i0"}}},
       ""},
  };
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    const FuzzProgram p = testing::MakeFuzzProgram(c.program);
    auto s = Schedule::Create(p.outputs);
    ASSERT_TRUE(s.ok());
    const Status applied = s->Apply(c.records);
    if (c.error.rfind("APPLY:", 0) == 0) {  // refused when applied
      ASSERT_FALSE(applied.ok());
      EXPECT_NE(applied.message().find(c.error.substr(6)), std::string::npos) << applied;
      continue;
    }
    ASSERT_TRUE(applied.ok()) << applied;
    SCOPED_TRACE(p.name + ", case " + std::to_string(n) + ":\n" + s->ToString());
    auto kernels = LowerAll(*s, p);
    if (!c.error.empty()) {
      ASSERT_FALSE(kernels.ok());
      EXPECT_NE(kernels.status().message().find(c.error), std::string::npos) << kernels.status();
      continue;
    }
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    bool compiled = false;
    ExpectSameAsUnscheduled(p, *kernels, 7 + n, compiled);
    EXPECT_TRUE(compiled);
  }
}

TEST(TeFuzzTest, RandomSchedulesComputeWhatTheProgramComputes) {
  const int64_t cases = EnvOr("KILN_TE_FUZZ_CASES", 3000);
  const int64_t first = EnvOr("KILN_TE_FUZZ_SEED", 1);
  const bool verbose = EnvOr("KILN_TE_FUZZ_VERBOSE", 0) != 0;  // print each lowering error
  std::map<std::string, int> applied, lowered_by_program, lowered_with;
  int lowered = 0, rejected = 0, lowering_errors = 0, codegen_errors = 0, unverified = 0;
  for (int64_t c = first; c < first + cases; ++c) {
    const FuzzProgram p = testing::MakeFuzzProgram(static_cast<int>(c % testing::kFuzzPrograms));
    SCOPED_TRACE(p.name + ", case " + std::to_string(c));
    auto s = testing::DrawSchedule(
        p, static_cast<uint64_t>(c),
        [&](const Primitive& prim, const Status& status, const std::string& before,
            const std::string& after) {
          ++rejected;
          // Rejected: the same schedule, and an error that names the stage.
          EXPECT_EQ(after, before) << prim.ToString();
          EXPECT_FALSE(status.message().empty()) << prim.ToString();
          EXPECT_NE(status.message().find(prim.stage), std::string::npos)
              << prim.ToString() << ": " << status;
        },
        &applied);
    ASSERT_TRUE(s.ok()) << s.status();
    SCOPED_TRACE("schedule:\n" + s->ToString());

    // The records replay to an equal schedule.
    auto replay = Schedule::Create(p.outputs);
    ASSERT_TRUE(replay.ok());
    const Status replayed = replay->Apply(s->primitives());
    ASSERT_TRUE(replayed.ok()) << replayed;
    EXPECT_TRUE(*replay == *s);
    // So does their text: each record parses back to itself, and the
    // printed schedule applied as text gives the same schedule.
    for (const Primitive& prim : s->primitives()) {
      StatusOr<Primitive> parsed = ParsePrimitive(prim.ToString());
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_TRUE(*parsed == prim) << prim.ToString();
    }
    auto from_text = Schedule::Create(p.outputs);
    ASSERT_TRUE(from_text.ok());
    const Status applied_text = from_text->ApplyText(s->ToString());
    ASSERT_TRUE(applied_text.ok()) << applied_text;
    EXPECT_TRUE(*from_text == *s);

    if (verbose) {
      std::printf("case %lld:\n%s", static_cast<long long>(c), s->ToString().c_str());
      std::fflush(stdout);
    }
    auto kernels = LowerAll(*s, p);
    if (!kernels.ok()) {
      ++lowering_errors;
      EXPECT_FALSE(kernels.status().message().empty());
      // Lowered, then refused by the verifier (docs/te.md, "Limits"): an
      // error, never a kernel; counted.
      if (kernels.status().message().find("does not verify") != std::string::npos) {
        ++unverified;
      }
      if (verbose) std::printf("%s\n", kernels.status().ToString().c_str());
      continue;
    }
    ++lowered;
    ++lowered_by_program[p.name];
    for (const Primitive& prim : s->primitives()) {
      ++lowered_with[std::string(Primitive::KindName(prim.kind))];
    }
    SCOPED_TRACE("lowered:\n" + Dump(*kernels));
    auto again = LowerAll(*replay, p);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(Dump(*again), Dump(*kernels));
    bool compiled = false;
    ExpectSameAsUnscheduled(p, *kernels, static_cast<uint64_t>(c) * 7919, compiled);
    if (::testing::Test::HasFatalFailure()) return;
    if (!compiled) ++codegen_errors;
  }
  std::printf(
      "[ INFO     ] %lld cases: %d lowered (%d of them refused by the code generator), %d did "
      "not lower (%d of them lowered to a function the verifier refused); %d primitives "
      "rejected\n",
      static_cast<long long>(cases), lowered, codegen_errors, lowering_errors, unverified,
      rejected);
  std::printf("[ INFO     ] applied:");
  for (const auto& [kind, n] : applied) std::printf(" %s %d", kind.c_str(), n);
  std::printf("\n[ INFO     ] primitives of the schedules that lowered:");
  for (const auto& [kind, n] : lowered_with) std::printf(" %s %d", kind.c_str(), n);
  std::printf("\n[ INFO     ] lowered per program:");
  for (const auto& [name, n] : lowered_by_program) std::printf(" %s %d", name.c_str(), n);
  std::printf("\n");
  // The cases must exercise the lowering, not only the errors.
  EXPECT_GE(lowered - codegen_errors, cases / 4);
}

}  // namespace
}  // namespace kiln::te
