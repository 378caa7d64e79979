#include "kiln/codegen/wgsl_names.h"

#include <gtest/gtest.h>

namespace kiln::codegen {
namespace {

TEST(WgslNamesTest, KeywordsReservedWordsAndBuiltinsAreReserved) {
  for (const char* name : {"var",
                           "let",
                           "fn",
                           "loop",
                           "enable",
                           "requires",
                           "override",
                           "diagnostic",
                           "mod",
                           "self",
                           "std",
                           "null",
                           "texture_2d",
                           "f16",
                           "vec4",
                           "array",
                           "select",
                           "exp",
                           "workgroupBarrier",
                           "subgroupAdd",
                           "read",
                           "read_write",
                           "storage",
                           "uniform",
                           "workgroup",
                           "_"}) {
    EXPECT_TRUE(IsReservedWgslName(name)) << name;
  }
  for (const char* name : {"x", "A", "blockIdx_x", "data", "out", "input", "result"}) {
    EXPECT_FALSE(IsReservedWgslName(name)) << name;
  }
}

TEST(WgslNamesTest, SanitizeMakesValidIdentifiers) {
  EXPECT_EQ(SanitizeWgslIdentifier("blockIdx.x"), "blockIdx_x");
  EXPECT_EQ(SanitizeWgslIdentifier("3d"), "v3d");
  EXPECT_EQ(SanitizeWgslIdentifier("__x"), "v__x");
  EXPECT_EQ(SanitizeWgslIdentifier(""), "v");
  EXPECT_EQ(SanitizeWgslIdentifier("__"), "v__");
  EXPECT_EQ(SanitizeWgslIdentifier("a-b c"), "a_b_c");
}

TEST(WgslNamesTest, FreshNamesNeverCollideNorUseReservedWords) {
  NameSupply names;
  EXPECT_EQ(names.Fresh("x"), "x");
  EXPECT_EQ(names.Fresh("x"), "x_1");
  EXPECT_EQ(names.Fresh("x"), "x_2");
  EXPECT_EQ(names.Fresh("x_1"), "x_1_1");
  EXPECT_EQ(names.Fresh("var"), "var_1");
  EXPECT_EQ(names.Fresh("exp"), "exp_1");
  EXPECT_EQ(names.Fresh("a.b"), "a_b");
  EXPECT_EQ(names.Fresh("a_b"), "a_b_1");
  EXPECT_EQ(names.Fresh("kiln_erf_f32"), "vkiln_erf_f32");
  // Every name with the texture prefix is reserved, numbered or not.
  EXPECT_EQ(names.Fresh("texture_fn"), "vtexture_fn");
  EXPECT_EQ(names.Fresh("textureA"), "vtextureA");
  EXPECT_EQ(names.Fresh("textureA"), "vtextureA_1");
  names.Reserve("helper");
  EXPECT_EQ(names.Fresh("helper"), "helper_1");
}

}  // namespace
}  // namespace kiln::codegen
