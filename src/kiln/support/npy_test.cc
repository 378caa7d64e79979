#include "kiln/support/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

namespace kiln::npy {
namespace {

// A .npy file of `version` with `header` verbatim (no padding) and `data`.
std::string File(const std::string& header, const std::string& data, int version = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (version >= 2) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header + data;
}

std::string Floats(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) s.append(reinterpret_cast<const char*>(&v), 4);
  return s;
}

TEST(NpyTest, ParsesVersion1) {
  auto a = Parse(File("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }    \n",
                      Floats({1, 2, 3, 4})));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(a->elements(), 4u);
  EXPECT_EQ(a->data, Floats({1, 2, 3, 4}));
  EXPECT_EQ(a->ShapeText(), "(2, 2)");
}

TEST(NpyTest, ParsesVersions2And3AndOtherSpellings) {
  for (int version : {2, 3}) {
    auto a = Parse(File("{\"shape\":(3,),\"fortran_order\":False,\"descr\":\"<i4\"}\n",
                        std::string(12, '\0'), version));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dtype, DType::kI32);
    EXPECT_EQ(a->shape, (std::vector<uint64_t>{3}));
  }
  auto scalar = Parse(File("{'descr': '<f2', 'fortran_order': False, 'shape': ()}", "ab"));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->elements(), 1u);
  EXPECT_EQ(scalar->ShapeText(), "()");
  // (00 is a Python int, 0, as numpy reads it.)
  auto empty = Parse(File("{'descr': '|b1', 'fortran_order': False, 'shape': (00, 5)}", ""));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->elements(), 0u);
  for (auto [descr, size] : {std::pair{"|u1", 1}, {"|i1", 1}, {"<u4", 4}, {"=f4", 4}, {"<b1", 1}}) {
    auto a =
        Parse(File(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,)}",
                   std::string(size, '\0')));
    EXPECT_TRUE(a.ok()) << descr << ": " << a.status();
  }
}

// Expects Parse(bytes) to fail with a message containing `what`.
void ExpectError(const std::string& bytes, const std::string& what) {
  auto a = Parse(bytes);
  ASSERT_FALSE(a.ok()) << "accepted; expected: " << what;
  EXPECT_NE(a.status().message().find(what), std::string::npos) << a.status();
}

TEST(NpyTest, RejectsMalformedFiles) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}";
  ExpectError("", "not a .npy file");
  ExpectError("PK\x03\x04 this is a zip", "not a .npy file");
  ExpectError(std::string("\x93NUMPY"), "truncated");
  ExpectError(std::string("\x93NUMPY\x01\x00\x40"), "truncated");
  ExpectError(File(good, Floats({1, 2})).substr(0, 20), "truncated: the header says");
  ExpectError(File(good, Floats({1})), "truncated: shape (2,) of <f4 needs 8 bytes of data");
  ExpectError(File(good, Floats({1, 2, 3})), "4 bytes after the data");
  std::string v4 = File(good, Floats({1, 2}));
  v4[6] = 4;
  ExpectError(v4, "unsupported .npy format version 4.0");
  ExpectError(File("{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", Floats({1, 2})),
              "fortran_order is True");
  ExpectError(File("{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", Floats({1, 2})),
              "big-endian");
  ExpectError(File("{'descr': '<f8', 'fortran_order': False, 'shape': (1,)}", Floats({1, 2})),
              "unsupported dtype '<f8'");
  ExpectError(File("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", ""),
              "unsupported dtype '|O'");
  ExpectError(File("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", Floats({1, 2})),
              "unsupported dtype");
  // A NUL or other unprintable byte in the dtype is shown, and the message
  // stays whole.
  ExpectError(File(std::string("{'descr': '<f4\0', 'fortran_order': False, 'shape': (1,)}", 56),
                   Floats({1})),
              "unsupported dtype '<f4\\x00' (supported: <f4, <f2, <i4, <u4, |i1, |u1, |b1)");
  ExpectError(File("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", Floats({1})),
              "structured");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False}", ""), "no 'shape'");
  ExpectError(File("{'descr': '<f4', 'shape': (1,)}", Floats({1})), "no 'fortran_order'");
  ExpectError(File("{'fortran_order': False, 'shape': (1,)}", Floats({1})), "no 'descr'");
  ExpectError(
      File("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", Floats({1})),
      "appears twice");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", ""),
              "unknown key 'x'");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", ""),
              "a negative dimension in 'shape' at byte 51 of the header");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}", Floats({1})),
              "dimension '01' at byte 51 of the header has a leading zero (not a Python int)");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", Floats({1, 2})),
              "is not a tuple");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", ""),
              "expected ',' or ')'");
  ExpectError(File("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", Floats({1})),
              "malformed header");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", Floats({1})),
              "malformed header");
  ExpectError(File("['descr']", ""), "not a dictionary");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", Floats({1})),
              "text after the header's dictionary at byte 56 of the header");
  ExpectError(
      File("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", ""),
      "the dimension at byte 51 of the header is beyond 64 bits");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                   "4294967296)}",
                   ""),
              "more elements than 64 bits");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,)}", ""),
              "more bytes than 64 bits");
  ExpectError(File("{'descr': '<f4", ""), "the string at byte 10 of the header is not terminated");
  ExpectError(File("{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,)}", ""),
              "an escape in a string at byte 13 of the header");
  ExpectError(File("{'descr': [('a', '<f4')", ""),
              "the '[' at byte 10 of the header is not closed");
  ExpectError(File("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x\xc3\xa9': 1}", ""),
              "byte 58 of the header is not ASCII (0xc3); version 1 headers are ASCII");
}

TEST(NpyTest, SerializeRoundTrips) {
  Array a;
  a.dtype = DType::kF32;
  a.shape = {2, 3};
  a.data = Floats({1, 2, 3, 4, 5, 6});
  auto bytes = Serialize(a);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size() % 64, a.data.size() % 64);  // the data starts 64-aligned
  EXPECT_EQ(bytes->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(bytes->find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
  auto back = Parse(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype, a.dtype);
  EXPECT_EQ(back->shape, a.shape);
  EXPECT_EQ(back->data, a.data);

  for (DType t : {DType::kF16, DType::kI32, DType::kU32, DType::kI8, DType::kU8, DType::kBool}) {
    Array b;
    b.dtype = t;
    b.shape = {5};
    b.data.assign(5 * ItemSize(t), '\1');
    auto s = Serialize(b);
    ASSERT_TRUE(s.ok()) << s.status();
    auto p = Parse(*s);
    ASSERT_TRUE(p.ok()) << DescrOf(t) << ": " << p.status();
    EXPECT_EQ(p->dtype, t);
    EXPECT_EQ(p->ShapeText(), "(5,)");
  }

  Array wrong;
  wrong.shape = {3};
  wrong.data = Floats({1});
  EXPECT_FALSE(Serialize(wrong).ok());
}

TEST(NpyTest, FilesNameThePath) {
  char tmpl[] = "/tmp/kiln_npy_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  Array a;
  a.dtype = DType::kI32;
  a.shape = {2};
  a.data.assign(8, '\0');
  ASSERT_TRUE(WriteNpyFile(dir + "/a.npy", a).ok());
  auto back = ReadNpyFile(dir + "/a.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape, a.shape);
  std::ofstream(dir + "/bad.npy", std::ios::binary) << "hello";
  auto bad = ReadNpyFile(dir + "/bad.npy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'" + dir + "/bad.npy': not a .npy file"),
            std::string::npos)
      << bad.status();
  auto missing = ReadNpyFile(dir + "/none.npy");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.npy"), std::string::npos) << missing.status();
  EXPECT_FALSE(WriteNpyFile(dir + "/no/such/dir/x.npy", a).ok());
  std::remove((dir + "/a.npy").c_str());
  std::remove((dir + "/bad.npy").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace kiln::npy
