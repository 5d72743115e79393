// A launcher command line as owned words, parsed by hvds__command_line_parse.
#ifndef HVDS_TEST_LAUNCHER_ARGS_H_
#define HVDS_TEST_LAUNCHER_ARGS_H_

#include <string>
#include <utility>
#include <vector>

#include "command_line.h"

namespace hvds_test {

struct Args {
  explicit Args(std::vector<std::string> words) : words_(std::move(words)) {
    for (auto& w : words_) argv_.push_back(&w[0]);
    argv_.push_back(nullptr);
  }
  hvds_result_t Parse(hvds_run_args_t* a) {
    return hvds__command_line_parse(static_cast<int>(words_.size()), argv_.data(), a, err,
                                    sizeof(err));
  }
  std::vector<std::string> words_;
  std::vector<char*> argv_;
  char err[512] = "";
};

}  // namespace hvds_test

#endif  // HVDS_TEST_LAUNCHER_ARGS_H_
