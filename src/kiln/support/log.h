// kiln's log: messages for whoever asked for them, on stderr.
//
// Off unless $KILN_LOG is set (to anything but "" or "0") or SetLogging(true)
// was called (the kiln tool's --verbose). The WebGPU implementations print
// their own diagnostics (Dawn's "Warning: ..." lines while it enumerates
// adapters) straight to stderr; RouteStderrToLog sends those through this
// log instead, so they reach the terminal only when asked for.
#pragma once

#include <functional>
#include <string_view>

namespace kiln {

bool LoggingEnabled();
void SetLogging(bool enabled);

// "kiln: [source] message" on stderr, when logging is enabled.
void Log(std::string_view source, std::string_view message);

// Runs `fn` with the process's stderr (file descriptor 2) captured, then
// routes what was written line by line: a diagnostic line of the form
// "Debug: ...", "Info: ..." or "Warning: ..." goes to Log(source, line);
// every other line (an error, or output from elsewhere) is written to stderr
// unchanged. Calls are serialised; if stderr cannot be captured, `fn` runs
// with it untouched.
void RouteStderrToLog(std::string_view source, const std::function<void()>& fn);

}  // namespace kiln
