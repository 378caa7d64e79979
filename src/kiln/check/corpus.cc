#include "kiln/check/corpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "kiln/support/file.h"

namespace kiln::check {
namespace {

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

StatusOr<CorpusFile> ReadCorpusFile(const std::string& path) {
  CorpusFile file;
  file.path = path;
  KILN_ASSIGN_OR_RETURN(file.text, ReadInputFile(path));
  std::istringstream lines(file.text);
  size_t arg_lines = 0;
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    auto header = [&](std::string_view key) -> std::optional<std::string> {
      std::string prefix = "// " + std::string(key) + ":";
      if (line.rfind(prefix, 0) != 0) return std::nullopt;
      return line.substr(prefix.size());
    };
    if (auto fn = header("fn")) {
      auto w = Words(*fn);
      if (w.size() != 1) return InvalidArgument(path, ":", number, ": '// fn:' takes one name");
      file.runs.push_back({w[0], {}});
    } else if (auto args = header("args")) {
      if (arg_lines >= file.runs.size()) {
        return InvalidArgument(path, ":", number, ": '// args:' without a '// fn:' before it");
      }
      for (const std::string& kv : Words(*args)) {
        auto eq = kv.find('=');
        if (eq == std::string::npos) {
          return InvalidArgument(path, ":", number, ": expected name=value, found '", kv, "'");
        }
        file.runs[arg_lines].args[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      ++arg_lines;
    } else if (auto features = header("features")) {
      for (auto& f : Words(*features)) {
        f.erase(std::remove(f.begin(), f.end(), ','), f.end());
        if (!f.empty()) file.features.push_back(f);
      }
    } else if (auto tolerance = header("tolerance")) {
      file.tolerance = std::atof(tolerance->c_str());
      if (!(file.tolerance > 0)) return InvalidArgument(path, ":", number, ": bad tolerance");
    }
  }
  if (file.runs.empty()) return InvalidArgument(path, ": no '// fn:' header");
  return file;
}

std::vector<std::string> ListKirFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".kir") out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kiln::check
