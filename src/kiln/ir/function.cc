#include "kiln/ir/function.h"

#include "kiln/ir/printer.h"

namespace kiln::ir {

Param Param::FromBuffer(Buffer buffer) {
  KILN_CHECK(buffer.defined());
  Param p;
  p.buffer_ = std::move(buffer);
  return p;
}

Param Param::FromVar(Var var) {
  KILN_CHECK(var.defined());
  Param p;
  p.var_ = std::move(var);
  return p;
}

const std::string& Param::name() const {
  return is_buffer() ? buffer_.name() : var_.name();
}

Function::Function(std::string name, std::vector<Param> params, Stmt body, AttrMap attrs) {
  KILN_CHECK(body.defined());
  for (const Param& p : params) KILN_CHECK(p.is_buffer() || p.is_scalar());
  auto node = std::make_shared<FunctionNode>();
  node->name = std::move(name);
  node->params = std::move(params);
  node->body = std::move(body);
  node->attrs = std::move(attrs);
  node_ = std::move(node);
}

Function Function::WithBody(Stmt body) const {
  return Function(name(), params(), std::move(body), attrs());
}

Function Function::WithParams(std::vector<Param> params) const {
  return Function(name(), std::move(params), body(), attrs());
}

Function Function::WithAttr(const std::string& key, AttrValue value) const {
  AttrMap attrs = this->attrs();
  attrs[key] = std::move(value);
  return Function(name(), params(), body(), std::move(attrs));
}

const AttrValue* Function::GetAttr(const std::string& key) const {
  auto it = attrs().find(key);
  return it == attrs().end() ? nullptr : &it->second;
}

const Function* Module::Find(std::string_view name) const {
  for (const Function& f : functions) {
    if (f.name() == name) return &f;
  }
  return nullptr;
}

std::ostream& operator<<(std::ostream& os, const Function& f) {
  return os << Print(f);
}
std::ostream& operator<<(std::ostream& os, const Module& m) {
  return os << Print(m);
}

}  // namespace kiln::ir
