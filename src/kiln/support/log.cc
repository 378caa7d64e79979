#include "kiln/support/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace kiln {
namespace {

// -1: not decided yet (then $KILN_LOG decides), 0 off, 1 on.
std::atomic<int> g_logging{-1};

void WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = write(fd, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

bool IsDiagnostic(std::string_view line) {
  for (std::string_view prefix : {"Debug: ", "Info: ", "Warning: "}) {
    if (line.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace

bool LoggingEnabled() {
  int state = g_logging.load();
  if (state < 0) {
    const char* env = std::getenv("KILN_LOG");
    state = env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0 ? 1 : 0;
    g_logging.store(state);
  }
  return state == 1;
}

void SetLogging(bool enabled) {
  g_logging.store(enabled ? 1 : 0);
}

void Log(std::string_view source, std::string_view message) {
  if (!LoggingEnabled()) return;
  std::string line = "kiln: [" + std::string(source) + "] " + std::string(message);
  if (line.empty() || line.back() != '\n') line += '\n';
  std::fflush(stderr);
  WriteAll(STDERR_FILENO, line);
}

void RouteStderrToLog(std::string_view source, const std::function<void()>& fn) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::FILE* capture = std::tmpfile();
  const int saved = capture != nullptr ? dup(STDERR_FILENO) : -1;
  if (saved < 0) {
    if (capture != nullptr) std::fclose(capture);
    fn();
    return;
  }
  std::fflush(stderr);
  dup2(fileno(capture), STDERR_FILENO);
  fn();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);

  std::string text;
  std::rewind(capture);
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), capture)) > 0;) text.append(buffer, n);
  std::fclose(capture);
  std::string_view rest = text;
  // A diagnostic goes on over the indented lines after its first (" - While
  // trying to ...", "    at ...") up to a blank line, its end.
  bool in_diagnostic = false;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end == std::string_view::npos ? rest.size() : end + 1);
    rest.remove_prefix(line.size());
    const bool continues = in_diagnostic && (line[0] == ' ' || line[0] == '\t' || line[0] == '\n');
    in_diagnostic = IsDiagnostic(line) || (continues && line[0] != '\n');
    if (continues) {
      if (LoggingEnabled()) WriteAll(STDERR_FILENO, line);
    } else if (in_diagnostic) {
      Log(source, line);
    } else {
      WriteAll(STDERR_FILENO, line);
    }
  }
}

}  // namespace kiln
