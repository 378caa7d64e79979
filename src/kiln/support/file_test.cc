#include "kiln/support/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln {
namespace {

class ReadInputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const char* f : {"/small", "/big", "/fifo", "/empty", "/out"}) unlink((dir_ + f).c_str());
    rmdir((dir_ + "/out.tmp").c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const char* name, const std::string& content) {
    std::string path = dir_ + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string dir_;
};

TEST_F(ReadInputFileTest, ReadsRegularFiles) {
  auto text = ReadInputFile(Write("/small", std::string("a\0b", 3)));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string("a\0b", 3));
  auto empty = ReadInputFile(Write("/empty", ""));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, "");
}

TEST_F(ReadInputFileTest, RefusesWhatIsNotARegularFile) {
  auto missing = ReadInputFile(dir_ + "/missing");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("cannot open '" + dir_ + "/missing'"),
            std::string::npos)
      << missing.status();

  auto directory = ReadInputFile(dir_);
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos)
      << directory.status();

  // A FIFO without a writer: refused at once, without blocking.
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  auto fifo = ReadInputFile(dir_ + "/fifo");
  EXPECT_NE(fifo.status().message().find("is a FIFO"), std::string::npos) << fifo.status();

  auto zero = ReadInputFile("/dev/zero");
  EXPECT_NE(zero.status().message().find("'/dev/zero' is a character device"), std::string::npos)
      << zero.status();
}

TEST_F(ReadInputFileTest, RefusesFilesOverTheLimit) {
  std::string path = Write("/big", std::string(100, 'x'));
  auto big = ReadInputFile(path, 99);
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("100 bytes, more than the 99-byte limit"),
            std::string::npos)
      << big.status();
  auto exact = ReadInputFile(path, 100);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->size(), 100u);
}

// The names in `dir`, sorted.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The file appears whole or not at all; an error names what failed.
TEST_F(ReadInputFileTest, WritesAtomicallyAndNamesTheTemporaryFile) {
  const std::string path = dir_ + "/out";
  ASSERT_TRUE(WriteFileAtomically(path, "abc").ok());
  auto back = ReadInputFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "abc");
  EXPECT_EQ(Entries(dir_), std::vector<std::string>{"out"});  // no temporary left
  // A missing folder: the message names the temporary it could not make.
  Status s = WriteFileAtomically(dir_ + "/none/out", "defg");
  EXPECT_EQ(s.message().rfind("cannot write '" + dir_ +
                                  "/none/out': cannot create a temporary "
                                  "file beside it ('" +
                                  dir_ + "/none/out.",
                              0),
            0u)
      << s;
  EXPECT_NE(s.message().find(".tmp'): No such file or directory"), std::string::npos) << s;
}

// A file replaced keeps its permissions; a name as long as the file system
// allows is written through a shorter temporary.
TEST_F(ReadInputFileTest, ReplacingKeepsPermissionsAndLongNamesAreWritten) {
  const std::string path = dir_ + "/private";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(*ReadInputFile(path), "new");
  const std::string name(250, 'x');
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/" + name, "long").ok());
  EXPECT_EQ(*ReadInputFile(dir_ + "/" + name), "long");
  EXPECT_EQ(Entries(dir_), (std::vector<std::string>{"private", name}));
}

// What lies beside the destination, under the names a fixed temporary would
// take, is never written, followed or removed.
TEST_F(ReadInputFileTest, WritingNeverTouchesFilesOrLinksBesideIt) {
  const std::string path = dir_ + "/out";
  ASSERT_EQ(mkdir((path + ".tmp").c_str(), 0700), 0);
  std::ofstream(dir_ + "/small") << "precious";
  ASSERT_EQ(symlink((dir_ + "/small").c_str(), (path + ".tmp.link").c_str()), 0);
  ASSERT_EQ(symlink((dir_ + "/small").c_str(), (dir_ + "/empty").c_str()), 0);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(WriteFileAtomically(path, "abc").ok());
  EXPECT_EQ(*ReadInputFile(path), "abc");
  EXPECT_EQ(*ReadInputFile(dir_ + "/small"), "precious");
  EXPECT_EQ(Entries(dir_),
            (std::vector<std::string>{"empty", "out", "out.tmp", "out.tmp.link", "small"}));
  unlink((path + ".tmp.link").c_str());
}

TEST(FirstNonTextByteTest, AcceptsUtf8AndFindsTheFirstByteThatIsNot) {
  using namespace std::string_literals;
  EXPECT_EQ(FirstNonTextByte(""), std::nullopt);
  EXPECT_EQ(FirstNonTextByte("fn f() {}\n\t// x"), std::nullopt);
  // Two-, three- and four-byte characters, the largest code point.
  EXPECT_EQ(FirstNonTextByte("\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"),
            std::nullopt);
  EXPECT_EQ(FirstNonTextByte("ab\0c"s), 2u);
  EXPECT_EQ(FirstNonTextByte("ab\x80"), 2u);             // a lone continuation byte
  EXPECT_EQ(FirstNonTextByte("a\xC0\xAF"), 1u);          // overlong '/'
  EXPECT_EQ(FirstNonTextByte("a\xE0\x80\xAF"), 1u);      // overlong, three bytes
  EXPECT_EQ(FirstNonTextByte("a\xED\xA0\x80"), 1u);      // a surrogate
  EXPECT_EQ(FirstNonTextByte("a\xF4\x90\x80\x80"), 1u);  // past U+10FFFF
  EXPECT_EQ(FirstNonTextByte("a\xF5\x80\x80\x80"), 1u);
  EXPECT_EQ(FirstNonTextByte("abc\xE2\x82"), 3u);  // cut short at the end
  EXPECT_EQ(FirstNonTextByte("\xE2\x82x"), 0u);    // a continuation missing
  EXPECT_EQ(FirstNonTextByte("\xFF"), 0u);
}

TEST(CheckTextTest, NamesWhatAndWhereWithTheCodeAsked) {
  EXPECT_TRUE(CheckText("fn f() {}", "the WGSL").ok());
  Status bad = CheckText("ab\xC0\xAF", "a label");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "a label is not UTF-8 text: byte 2 of 4 is malformed or NUL");
  bad = CheckText(std::string("x\0", 2), "the WGSL", StatusCode::kDataLoss);
  EXPECT_EQ(bad.code(), StatusCode::kDataLoss);
  EXPECT_EQ(bad.message(), "the WGSL is not UTF-8 text: byte 1 of 2 is malformed or NUL");
}

}  // namespace
}  // namespace kiln
