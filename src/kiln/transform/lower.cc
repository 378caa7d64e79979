#include "kiln/transform/lower.h"

#include <array>
#include <chrono>

#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/visitor.h"

namespace kiln::transform {
namespace {

StatusOr<ir::Function> RunThreadBindings(const ir::Function& f, const LowerOptions&) {
  return LowerThreadBindings(f);
}
StatusOr<ir::Function> RunUnroll(const ir::Function& f, const LowerOptions& options) {
  return Unroll(f, options.unroll);
}
StatusOr<ir::Function> RunVectorize(const ir::Function& f, const LowerOptions& options) {
  return Vectorize(f, {options.source});
}
StatusOr<ir::Function> RunFlatten(const ir::Function& f, const LowerOptions&) {
  return FlattenBuffers(f);
}
StatusOr<ir::Function> RunNarrow(const ir::Function& f, const LowerOptions&) {
  return NarrowIndices(f);
}
StatusOr<ir::Function> RunSimplify(const ir::Function& f, const LowerOptions&) {
  return ir::Simplify(f);
}

constexpr std::array<Pass, 6> kPasses = {{
    {"lower-thread-bindings", RunThreadBindings},
    {"unroll", RunUnroll},
    {"vectorize", RunVectorize},
    {"flatten-buffers", RunFlatten},
    {"narrow-indices", RunNarrow},
    {"simplify", RunSimplify},
}};

// Whether a while loop's condition became the constant true: the loop
// never ends, which the verifier refuses at its line where it can see it
// (the values of lets and loop bounds); a pass may see further.
bool HasEndlessWhile(const ir::Function& f) {
  struct Finder : ir::StmtVisitor {
    bool found = false;
    void VisitWhile(const ir::WhileNode* op) override {
      if (const auto* b = op->cond.as<ir::BoolImmNode>(); b != nullptr && b->value) found = true;
      ir::StmtVisitor::VisitWhile(op);
    }
  } finder;
  finder.VisitStmt(f.body());
  return finder.found;
}

Status EndlessWhile(const ir::Function& lowered) {
  return CompileError(
      "a while loop's condition is always true once lowered (for the values of the loops and "
      "lets around it), so the loop never ends; the lowered function:\n",
      ir::Print(lowered));
}

}  // namespace

std::span<const Pass> LoweringPasses() { return kPasses; }

const Pass* FindLoweringPass(std::string_view name) {
  for (const Pass& pass : kPasses) {
    if (pass.name == name) return &pass;
  }
  return nullptr;
}

StatusOr<ir::Function> RunPasses(const ir::Function& function, std::span<const Pass> passes,
                                 const LowerOptions& options) {
  KILN_RETURN_IF_ERROR(ir::Verify(function, options.verify));
  ir::Function f = function;
  for (const Pass& pass : passes) {
    auto start = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(f, pass.run(f, options));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
    if (options.verify_each_pass) {
      if (HasEndlessWhile(f)) return EndlessWhile(f);
      Status verified = ir::Verify(f, options.verify);
      if (!verified.ok()) {
        return Internal("pass '", pass.name, "' produced invalid IR (a kiln bug): ",
                        verified.message(), "\n", ir::Print(f));
      }
    }
    if (options.observer) options.observer(pass.name, f, ms);
  }
  if (HasEndlessWhile(f)) return EndlessWhile(f);
  Status verified = ir::Verify(f, options.verify);
  if (!verified.ok()) {
    return Internal("lowering produced invalid IR (a kiln bug): ", verified.message(), "\n",
                    ir::Print(f));
  }
  return f;
}

StatusOr<ir::Function> Lower(const ir::Function& function, const LowerOptions& options) {
  return RunPasses(function, LoweringPasses(), options);
}

}  // namespace kiln::transform
