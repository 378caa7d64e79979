// The differential corpus: kiln IR files whose header comments say what to
// run and how.
//
//   // fn: NAME              a function to run (one line each)
//   // args: n=1000 m=17     its scalar arguments (one line per fn line, in order)
//   // features: shader-f16  device features it needs (optional)
//   // tolerance: 1e-5       float tolerance (optional)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/support/status.h"

namespace kiln::check {

struct CorpusRun {
  std::string function;
  std::map<std::string, std::string> args;
};

struct CorpusFile {
  std::string path;
  std::string text;
  std::vector<CorpusRun> runs;
  std::vector<std::string> features;
  double tolerance = 1e-4;
};

StatusOr<CorpusFile> ReadCorpusFile(const std::string& path);

// The .kir files directly inside `dir`, sorted.
std::vector<std::string> ListKirFiles(const std::string& dir);

}  // namespace kiln::check
