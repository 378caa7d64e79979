// The staging primitives on the CPU: lowered IR, records, replay, errors.
#include <gtest/gtest.h>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/printer.h"
#include "kiln/te/te.h"
#include "kiln/te/te_test_kernels.h"

namespace kiln::te {
namespace {

using testing::MatmulProgram;

TEST(TeScheduleTest, SharedMatmulLowers) {
  MatmulProgram p;
  auto s = testing::ScheduleSharedMatmul(p);
  ASSERT_TRUE(s.ok()) << s.status();
  std::printf("%s\n", s->ToString().c_str());
  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  std::printf("%s\n", ir::Print(*f).c_str());
}

TEST(TeScheduleTest, RowSumLowers) {
  testing::RowSumProgram p;
  auto s = testing::ScheduleRowSumAcrossThreads(p, 64);
  ASSERT_TRUE(s.ok()) << s.status();
  auto f = Lower(*s, {p.Y}, {p.X}, "rs");
  ASSERT_TRUE(f.ok()) << f.status();
  std::printf("%s\n", ir::Print(*f).c_str());
}

TEST(TeScheduleTest, StencilLowers) {
  testing::StencilProgram p;
  auto s = testing::ScheduleStencil(p, 64);
  ASSERT_TRUE(s.ok()) << s.status();
  auto f = Lower(*s, {p.C}, {p.A}, "st");
  ASSERT_TRUE(f.ok()) << f.status();
  std::printf("%s\n", ir::Print(*f).c_str());
}

}  // namespace
}  // namespace kiln::te
