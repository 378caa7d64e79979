// Functions (kernels) and modules.
//
// A Function is one kernel: a name, an ordered parameter list mixing buffer
// parameters (global buffers) and scalar parameters (i32, u32 or f32 vars),
// a body, and string-keyed attributes. Parameter order is the kernel ABI's
// order. A Module is an ordered list of functions with distinct names.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kiln/ir/buffer.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

// One parameter: either a buffer or a scalar variable.
class Param {
 public:
  static Param FromBuffer(Buffer buffer);
  static Param FromVar(Var var);

  bool is_buffer() const { return buffer_.defined(); }
  bool is_scalar() const { return var_.defined(); }
  // Precondition: is_buffer() / is_scalar().
  const Buffer& buffer() const { return buffer_; }
  const Var& var() const { return var_; }
  const std::string& name() const;

 private:
  Buffer buffer_;
  Var var_;
};

// Attribute values are strings or integers.
using AttrValue = std::variant<std::string, int64_t>;
// Ordered by key, so printing is deterministic.
using AttrMap = std::map<std::string, AttrValue>;

class FunctionNode {
 public:
  std::string name;
  std::vector<Param> params;
  Stmt body;
  AttrMap attrs;
};

class Function {
 public:
  Function() = default;
  // KILN_CHECKs that body is defined and every param is set.
  Function(std::string name, std::vector<Param> params, Stmt body, AttrMap attrs = {});

  bool defined() const { return node_ != nullptr; }
  const FunctionNode* get() const { return node_.get(); }
  const FunctionNode* operator->() const { return node_.get(); }
  bool same_as(const Function& other) const { return node_ == other.node_; }

  const std::string& name() const { return node_->name; }
  const std::vector<Param>& params() const { return node_->params; }
  const Stmt& body() const { return node_->body; }
  const AttrMap& attrs() const { return node_->attrs; }

  // Copies with one part replaced (passes use these).
  Function WithBody(Stmt body) const;
  Function WithParams(std::vector<Param> params) const;
  Function WithAttr(const std::string& key, AttrValue value) const;

  // The attribute, or nullptr.
  const AttrValue* GetAttr(const std::string& key) const;

 private:
  std::shared_ptr<const FunctionNode> node_;
};

struct Module {
  std::vector<Function> functions;

  // The function with that name, or nullptr.
  const Function* Find(std::string_view name) const;
};

std::ostream& operator<<(std::ostream& os, const Function& f);
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace kiln::ir
