// Reading input files: the one helper every kiln reader of user files uses
// (IR text, compiled modules, corpus files, .npy arrays); and writing output
// files whole or not at all.
#pragma once

#include <cstdint>
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

// Writes `bytes` to `path` through a temporary file beside it (`path`.tmp)
// renamed into place, so a failed write leaves neither a partial file nor
// the temporary. kInvalidArgument naming the path, and why, on failure.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace kiln
