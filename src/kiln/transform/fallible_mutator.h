// FallibleMutator: a statement mutator that can fail, and RewriteFunction,
// the one driver that runs such a mutator over a function.
//
// A pass reports the first error it meets with Fail() and carries on with
// placeholders (usually the unchanged node), so one run reports one error;
// RewriteFunction returns that error with the pass and function named.
#pragma once

#include <string_view>

#include "kiln/ir/function.h"
#include "kiln/ir/mutator.h"
#include "kiln/support/status.h"

namespace kiln::transform {

class FallibleMutator : public ir::StmtMutator {
 public:
  const Status& status() const { return status_; }

 protected:
  // Records kInvalidArgument with the concatenated message, unless an error
  // is already recorded.
  template <typename... Args>
  void Fail(const Args&... args) {
    if (status_.ok()) status_ = InvalidArgument(args...);
  }
  // Records `status` unless an error is already recorded.
  void FailWith(Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  // For helpers that share this mutator's error (a nested mutator).
  Status& shared_status() { return status_; }

 private:
  Status status_;
};

// Runs `mutator` over `function`: each buffer parameter through
// MutateBuffer, then the body. On error, the mutator's status with the
// context "PASS of 'FUNCTION'".
StatusOr<ir::Function> RewriteFunction(const ir::Function& function, FallibleMutator& mutator,
                                       std::string_view pass);

}  // namespace kiln::transform
