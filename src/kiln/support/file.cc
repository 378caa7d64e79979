#include "kiln/support/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>

namespace kiln {
namespace {

std::string_view FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::string> ReadInputFile(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not hang; it is refused
  // below once fstat says what it is.
  Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return InvalidArgument("cannot open '", path, "': ", std::strerror(errno));
  struct stat st = {};
  if (fstat(fd.get(), &st) != 0) {
    return InvalidArgument("cannot read '", path, "': ", std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("'", path, "' is ", FileKind(st.st_mode), "; expected a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return InvalidArgument("'", path, "' is ", st.st_size, " bytes, more than the ", max_bytes,
                           "-byte limit for input files");
  }
  std::string out;
  try {
    out.resize(static_cast<size_t>(st.st_size));
  } catch (const std::bad_alloc&) {
    return OutOfMemory("cannot hold the ", st.st_size, " bytes of '", path, "' in memory");
  }
  size_t done = 0;
  while (true) {
    if (done == out.size()) {
      // The file may have grown since fstat: read on, within the limit.
      if (out.size() >= max_bytes) {
        char probe;
        ssize_t n = read(fd.get(), &probe, 1);
        if (n > 0) {
          return InvalidArgument("'", path, "' is more than the ", max_bytes,
                                 "-byte limit for input files");
        }
        if (n == 0) break;
        if (errno == EINTR) continue;
        return InvalidArgument("cannot read '", path, "': ", std::strerror(errno));
      }
      try {
        out.resize(std::min<uint64_t>(max_bytes, std::max<size_t>(4096, out.size() * 2)));
      } catch (const std::bad_alloc&) {
        return OutOfMemory("cannot hold the content of '", path, "' in memory");
      }
    }
    ssize_t n = read(fd.get(), out.data() + done, out.size() - done);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return InvalidArgument("cannot read '", path, "': ", std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  // The temporary is a fresh file beside the destination, made exclusively
  // (O_EXCL, never through a link) under a random name: no existing file,
  // link or other output can be the one written or removed.
  std::random_device random;
  std::string temporary;
  // A name too long for the suffix (NAME_MAX is 255 on Linux) gets a short
  // temporary name in the same directory instead.
  const size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const bool short_name = path.size() - directory.size() + 13 > 255;
  // A regular file replaced keeps its permissions (not set-id bits), from
  // the temporary's creation on: its new bytes are never more readable.
  struct stat existing;
  const bool replacing = lstat(path.c_str(), &existing) == 0 && S_ISREG(existing.st_mode);
  const mode_t mode = replacing ? existing.st_mode & 0777 : 0666;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 64; ++attempt) {
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, ".%08x.tmp", static_cast<unsigned>(random()));
    temporary = (short_name ? directory + ".kiln" : path) + suffix;
    fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    return InvalidArgument("cannot write '", path, "': cannot create a temporary file beside it ('",
                           temporary, "'): ", std::strerror(errno));
  }
  const auto failed = [&](std::string_view doing, int error) {
    if (fd >= 0) close(fd);
    unlink(temporary.c_str());
    return InvalidArgument("cannot write '", path, "': ", doing, " its temporary '", temporary,
                           "': ", std::strerror(error));
  };
  // (open's mode is masked by the umask; a replaced file's mode is not.)
  if (replacing && fchmod(fd, mode) != 0) return failed("setting the permissions of", errno);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed("writing", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  const int closed = close(fd);
  fd = -1;
  if (closed != 0) return failed("closing", errno);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return InvalidArgument("cannot write '", path, "': ", std::strerror(error));
  }
  return Status::Ok();
}

std::optional<size_t> FirstNonTextByte(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char b = byte(i);
    if (b == 0) return i;
    if (b < 0x80) {
      ++i;
      continue;
    }
    // The lead byte gives the length and the first continuation byte's range
    // (which excludes overlong forms, surrogates and values past U+10FFFF).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      length = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      length = 3;
      if (b == 0xE0) low = 0xA0;
      if (b == 0xED) high = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      length = 4;
      if (b == 0xF0) low = 0x90;
      if (b == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    for (size_t k = 1; k < length; ++k) {
      if (i + k >= text.size()) return i;
      const unsigned char c = byte(i + k);
      if (c < (k == 1 ? low : 0x80) || c > (k == 1 ? high : 0xBF)) return i;
    }
    i += length;
  }
  return std::nullopt;
}

Status CheckText(std::string_view text, std::string_view what, StatusCode code) {
  if (const std::optional<size_t> at = FirstNonTextByte(text)) {
    return Status(code, StrCat(what, " is not UTF-8 text: byte ", *at, " of ", text.size(),
                               " is malformed or NUL"));
  }
  return Status::Ok();
}

}  // namespace kiln
