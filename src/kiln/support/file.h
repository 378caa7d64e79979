// Reading input files: the one helper every kiln reader of user files uses
// (IR text, compiled modules, corpus files, .npy arrays); and writing output
// files whole or not at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/support/status.h"

namespace kiln {

// The largest input file kiln reads: 1 GiB.
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{1} << 30;

// The whole content of the regular file at `path`. A missing or unreadable
// file, a directory, a FIFO, a device or other non-regular file, and a file
// larger than `max_bytes` are kInvalidArgument errors naming the path; the
// call never blocks on a FIFO and never reads past `max_bytes`.
StatusOr<std::string> ReadInputFile(const std::string& path,
                                    uint64_t max_bytes = kMaxInputFileBytes);

// Where `text` stops being UTF-8 text: the offset of its first byte that
// does not begin or continue a well-formed UTF-8 character (overlong forms,
// surrogates and code points past U+10FFFF included) or is NUL; empty when
// all of it is. Text formats (WGSL, IR) check their files with it so binary
// junk is named as such, not as a syntax error somewhere inside it.
std::optional<size_t> FirstNonTextByte(std::string_view text);

// OK when `text` is UTF-8 text without NUL; else an error of `code`:
// "`what` is not UTF-8 text: byte N of M is malformed or NUL". Strings that
// reach a WebGPU implementation are checked with it (one may not survive
// other bytes), and so are the strings of files in text formats.
Status CheckText(std::string_view text, std::string_view what,
                 StatusCode code = StatusCode::kInvalidArgument);

// Writes `bytes` to `path` through a temporary file beside it
// (`path`.XXXXXXXX.tmp, or .kiln.XXXXXXXX.tmp in its directory where the
// name is too long for the suffix; a fresh name, created exclusively: never
// an existing file or a link) renamed into place, so a failed write leaves
// neither a partial file nor the temporary. A file replaced keeps its
// permissions. kInvalidArgument naming the path, and why, on failure.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace kiln
