#include "kiln/codegen/module_format.h"

#include <cstring>

namespace kiln::codegen {
namespace {

// Appends little-endian integers and length-prefixed strings.
class ByteWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void Reserve(size_t bytes) { out_.reserve(bytes); }
  std::string Take() && { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what ByteWriter wrote. Every read is bounds-checked; the first
// failure sticks, and `what` names the field for the error message.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  bool U8(uint8_t& v, std::string_view what) {
    if (!Need(1, what)) return false;
    v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool U32(uint32_t& v, std::string_view what) {
    if (!Need(4, what)) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(in_[pos_++])} << (8 * i);
    return true;
  }
  bool U64(uint64_t& v, std::string_view what) {
    if (!Need(8, what)) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(in_[pos_++])} << (8 * i);
    return true;
  }
  bool Str(std::string& s, std::string_view what) {
    uint32_t n = 0;
    if (!U32(n, what) || !Need(n, what)) return false;
    s.assign(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  // A count of items each at least `min_item_bytes` long; rejects counts the
  // remaining bytes cannot hold, so a corrupt count cannot cause a huge reserve.
  bool Count(uint32_t& n, size_t min_item_bytes, std::string_view what) {
    if (!U32(n, what)) return false;
    if (uint64_t{n} * min_item_bytes > in_.size() - pos_) {
      error_ = StrCat("count of ", what, " (", n, ") exceeds the remaining payload");
      return false;
    }
    return true;
  }

  // Records a semantic error found by the caller.
  void Fail(std::string message) { error_ = std::move(message); }

  bool AtEnd() const { return pos_ == in_.size(); }
  size_t pos() const { return pos_; }
  const std::string& error() const { return error_; }

 private:
  bool Need(size_t n, std::string_view what) {
    if (in_.size() - pos_ >= n) return true;
    error_ = StrCat("payload ends inside ", what, " at byte ", pos_);
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::string error_;
};

void WriteExtent(ByteWriter& w, const ExtentExpr& e) {
  w.Str(e.text);
  w.U32(static_cast<uint32_t>(e.ops.size()));
  for (const ExtentOp& op : e.ops) {
    w.U8(static_cast<uint8_t>(op.code));
    w.U8(op.bits);
    w.U8(op.is_signed ? 1 : 0);
    w.U64(static_cast<uint64_t>(op.value));
  }
}

bool ReadExtent(ByteReader& r, ExtentExpr& e, std::string_view what) {
  uint32_t count = 0;
  if (!r.Str(e.text, what) || !r.Count(count, 11, what)) return false;
  e.ops.resize(count);
  for (size_t position = 0; position < e.ops.size(); ++position) {
    ExtentOp& op = e.ops[position];
    uint8_t code = 0, is_signed = 0;
    uint64_t value = 0;
    if (!r.U8(code, what) || !r.U8(op.bits, what) || !r.U8(is_signed, what) ||
        !r.U64(value, what)) {
      return false;
    }
    op.code = static_cast<ExtentOp::Code>(code);
    // What the writer writes and nothing else: a flag of 0 or 1, and a
    // value only where the op takes one.
    if (is_signed > 1) {
      r.Fail(StrCat(what, ": op ", position, " has signedness flag ", int{is_signed},
                    "; expected 0 or 1"));
      return false;
    }
    if (value != 0 && code != static_cast<uint8_t>(ExtentOp::Code::kConst) &&
        code != static_cast<uint8_t>(ExtentOp::Code::kParam)) {
      r.Fail(StrCat(what, ": op ", position, " (code ", int{code}, ") carries a value (",
                    static_cast<int64_t>(value), "); only constants and parameters do"));
      return false;
    }
    op.is_signed = is_signed != 0;
    op.value = static_cast<int64_t>(value);
  }
  return true;
}

void WriteFunction(ByteWriter& w, const CompiledFunction& f) {
  const KernelMetadata& m = f.metadata;
  w.Str(m.name);
  w.Str(m.entry_point);
  w.U32(static_cast<uint32_t>(m.params.size()));
  for (const ParamInfo& p : m.params) {
    w.Str(p.name);
    w.U8(static_cast<uint8_t>(p.kind));
    w.U8(static_cast<uint8_t>(p.dtype));
    w.U8(static_cast<uint8_t>(p.access));
    w.U32(p.binding);
    w.U8(static_cast<uint8_t>(p.lanes));
    w.U32(p.uniform_offset);
    w.U32(static_cast<uint32_t>(p.shape.size()));
    for (const ExtentExpr& dim : p.shape) WriteExtent(w, dim);
    w.U32(static_cast<uint32_t>(p.strides.size()));
    for (const ExtentExpr& stride : p.strides) WriteExtent(w, stride);
  }
  WriteExtent(w, m.num_blocks_x);
  WriteExtent(w, m.num_blocks_y);
  for (uint32_t s : m.workgroup_size) w.U32(s);
  w.U32(static_cast<uint32_t>(m.required_features.size()));
  for (const std::string& feature : m.required_features) w.Str(feature);
  w.U32(m.uniform_binding);
  w.U32(m.uniform_block_size);
  w.U32(m.workgroup_storage_bytes);
  w.U8(m.loops_terminate ? 1 : 0);
  w.Str(f.wgsl);
  w.Str(f.source_ir);
}

bool ReadParam(ByteReader& r, ParamInfo& p) {
  uint8_t kind = 0, access = 0, dtype = 0, lanes = 0;
  uint32_t rank = 0;
  if (!r.Str(p.name, "parameter name") || !r.U8(kind, "parameter kind") ||
      !r.U8(dtype, "parameter dtype") || !r.U8(access, "parameter access") ||
      !r.U32(p.binding, "parameter binding") || !r.U8(lanes, "parameter lanes") ||
      !r.U32(p.uniform_offset, "uniform offset") || !r.Count(rank, 4, "shape rank")) {
    return false;
  }
  if (dtype > kLastDType) {
    r.Fail(StrCat("parameter '", p.name, "' has unknown dtype ", int{dtype}));
    return false;
  }
  p.dtype = static_cast<DType>(dtype);
  p.kind = static_cast<ParamKind>(kind);
  p.access = static_cast<BufferAccess>(access);
  p.lanes = lanes;
  p.shape.resize(rank);
  for (ExtentExpr& dim : p.shape) {
    if (!ReadExtent(r, dim, "shape extent")) return false;
  }
  uint32_t num_strides = 0;
  if (!r.Count(num_strides, 4, "stride count")) return false;
  if (num_strides != 0 && num_strides != rank) {
    r.Fail(StrCat("parameter '", p.name, "' has ", num_strides, " strides for rank ", rank));
    return false;
  }
  p.strides.resize(num_strides);
  for (ExtentExpr& stride : p.strides) {
    if (!ReadExtent(r, stride, "stride")) return false;
  }
  return true;
}

Status ReadFunction(ByteReader& r, size_t index, CompiledFunction& f) {
  KernelMetadata& m = f.metadata;
  auto fail = [&]() {
    return DataLoss("corrupt module: function ", index, (m.name.empty() ? "" : " '"), m.name,
                    (m.name.empty() ? "" : "'"), ": ", r.error());
  };
  uint8_t loops_terminate = 0;
  uint32_t num_params = 0;
  if (!r.Str(m.name, "function name") || !r.Str(m.entry_point, "entry point") ||
      !r.Count(num_params, 20, "parameters")) {
    return fail();
  }
  m.params.resize(num_params);
  for (ParamInfo& p : m.params) {
    if (!ReadParam(r, p)) return fail();
    if (p.kind != ParamKind::kBuffer && p.kind != ParamKind::kScalar) {
      return DataLoss("corrupt module: function '", m.name, "': parameter '", p.name,
                      "' has unknown kind ", static_cast<int>(p.kind));
    }
    if (p.access != BufferAccess::kRead && p.access != BufferAccess::kReadWrite) {
      return DataLoss("corrupt module: function '", m.name, "': parameter '", p.name,
                      "' has unknown access ", static_cast<int>(p.access));
    }
  }
  uint32_t num_features = 0;
  if (!ReadExtent(r, m.num_blocks_x, "launch extent x") ||
      !ReadExtent(r, m.num_blocks_y, "launch extent y") ||
      !r.U32(m.workgroup_size[0], "workgroup size") ||
      !r.U32(m.workgroup_size[1], "workgroup size") ||
      !r.U32(m.workgroup_size[2], "workgroup size") ||
      !r.Count(num_features, 4, "required features")) {
    return fail();
  }
  m.required_features.resize(num_features);
  for (std::string& feature : m.required_features) {
    if (!r.Str(feature, "feature name")) return fail();
  }
  if (!r.U32(m.uniform_binding, "uniform binding") ||
      !r.U32(m.uniform_block_size, "uniform block size") ||
      !r.U32(m.workgroup_storage_bytes, "workgroup storage size") ||
      !r.U8(loops_terminate, "loop termination") || !r.Str(f.wgsl, "WGSL") ||
      !r.Str(f.source_ir, "source IR")) {
    return fail();
  }
  if (loops_terminate > 1) {
    r.Fail(StrCat("loop termination flag ", int{loops_terminate}));
    return fail();
  }
  m.loops_terminate = loops_terminate == 1;
  return Status::Ok();
}

}  // namespace

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string SerializeModule(const CompiledModule& module) {
  // The payload goes after room for the header, which is filled in last, so
  // that a large module is written once into one buffer of about its size.
  size_t estimate = kModuleHeaderBytes + 4;
  for (const CompiledFunction& f : module.functions) {
    estimate += f.wgsl.size() + f.source_ir.size() + 128 + 64 * f.metadata.params.size();
  }
  ByteWriter payload;
  payload.Reserve(estimate);
  for (size_t i = 0; i < kModuleHeaderBytes; ++i) payload.U8(0);
  payload.U32(static_cast<uint32_t>(module.functions.size()));
  for (const CompiledFunction& f : module.functions) WriteFunction(payload, f);
  std::string out = std::move(payload).Take();
  const std::string_view body = std::string_view(out).substr(kModuleHeaderBytes);

  ByteWriter header;
  for (char c : kModuleMagic) header.U8(static_cast<uint8_t>(c));
  header.U32(kModuleFormatVersion);
  header.U32(0);  // reserved flags
  header.U64(body.size());
  header.U64(Fnv1a64(body));
  const std::string head = std::move(header).Take();
  out.replace(0, head.size(), head);
  return out;
}

StatusOr<CompiledModule> DeserializeModule(std::string_view bytes) {
  // Magic first: a short file of the wrong kind says "bad magic", not "truncated".
  size_t magic_seen = std::min(bytes.size(), kModuleMagic.size());
  if (bytes.substr(0, magic_seen) != kModuleMagic.substr(0, magic_seen)) {
    return DataLoss("not a kiln module: bad magic (expected \"KILNWGSL\")");
  }
  if (bytes.size() < kModuleHeaderBytes) {
    return DataLoss("truncated module: ", bytes.size(), " bytes, shorter than the ",
                    kModuleHeaderBytes, "-byte header");
  }
  ByteReader header(bytes.substr(kModuleMagic.size(), kModuleHeaderBytes - kModuleMagic.size()));
  uint32_t version = 0, flags = 0;
  uint64_t length = 0, checksum = 0;
  (void)(header.U32(version, "version") && header.U32(flags, "flags") &&
         header.U64(length, "length") && header.U64(checksum, "checksum"));
  if (version != kModuleFormatVersion) {
    return DataLoss("unsupported module format version ", version, ", expected ",
                    kModuleFormatVersion);
  }
  if (flags != 0) return DataLoss("corrupt module: unknown header flags ", flags);
  std::string_view payload = bytes.substr(kModuleHeaderBytes);
  if (payload.size() < length) {
    return DataLoss("truncated module: header declares ", length, " payload bytes, file has ",
                    payload.size());
  }
  if (payload.size() > length) {
    return DataLoss("corrupt module: ", payload.size() - length,
                    " bytes past the declared payload length ", length);
  }
  if (Fnv1a64(payload) != checksum) {
    return DataLoss("corrupt module: payload checksum mismatch");
  }

  ByteReader r(payload);
  CompiledModule module;
  uint32_t num_functions = 0;
  if (!r.Count(num_functions, 8, "functions")) return DataLoss("corrupt module: ", r.error());
  module.functions.resize(num_functions);
  for (size_t i = 0; i < module.functions.size(); ++i) {
    KILN_RETURN_IF_ERROR(ReadFunction(r, i, module.functions[i]));
  }
  if (!r.AtEnd()) {
    return DataLoss("corrupt module: ", payload.size() - r.pos(),
                    " unread bytes after the last function");
  }
  return module;
}

}  // namespace kiln::codegen
