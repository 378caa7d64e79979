#include "kiln/support/npy.h"

#include <cstring>
#include <new>
#include <optional>

#include "kiln/support/file.h"

namespace kiln::npy {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct DTypeInfo {
  DType dtype;
  char kind;  // NumPy's kind character
  uint32_t size;
  std::string_view descr;
  std::string_view name;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, 'f', 4, "<f4", "f32"},   {DType::kF16, 'f', 2, "<f2", "f16"},
    {DType::kI32, 'i', 4, "<i4", "i32"},   {DType::kU32, 'u', 4, "<u4", "u32"},
    {DType::kI8, 'i', 1, "|i1", "i8"},     {DType::kU8, 'u', 1, "|u1", "u8"},
    {DType::kBool, 'b', 1, "|b1", "bool"},
};

const DTypeInfo& InfoOf(DType t) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == t) return info;
  }
  return kDTypes[0];
}

// The dtype a descr names: a byte-order character, a kind and a size.
StatusOr<DType> ParseDescr(std::string_view descr) {
  // Bytes other than printable ASCII as \xNN: the message stays whole.
  std::string shown;
  for (unsigned char c : descr) {
    if (c >= 0x20 && c < 0x7f) {
      shown += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      shown += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  auto unsupported = [&](std::string_view why) {
    return InvalidArgument("unsupported dtype '", shown, "'", why,
                           " (supported: <f4, <f2, <i4, <u4, |i1, |u1, |b1)");
  };
  if (descr.size() < 3) return unsupported("");
  const char order = descr[0];
  if (order == '>') return unsupported(": big-endian data");
  if (order != '<' && order != '|' && order != '=') return unsupported("");
  std::string_view size_text = descr.substr(2);
  uint32_t size = 0;
  for (char c : size_text) {
    if (c < '0' || c > '9' || size > 1000) return unsupported("");
    size = size * 10 + static_cast<uint32_t>(c - '0');
  }
  for (const DTypeInfo& info : kDTypes) {
    if (info.kind != descr[1] || info.size != size) continue;
    // '|' (not applicable) is for one-byte types only.
    if (order == '|' && size != 1) return unsupported("");
    return info.dtype;
  }
  return unsupported("");
}

// The header's Python literal, one token at a time.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  struct Value {
    enum class Kind { kString, kBool, kTuple, kOther } kind = Kind::kOther;
    std::string string;
    bool boolean = false;
    std::vector<uint64_t> tuple;
  };

  StatusOr<Array> Parse() {
    std::optional<Value> descr, fortran, shape;
    SkipSpace();
    if (!Eat('{')) return Malformed("the header is not a dictionary literal");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      KILN_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Eat(':')) return Malformed("no ':' after key '", key, "'");
      std::optional<Value>* slot = key == "descr"           ? &descr
                                   : key == "fortran_order" ? &fortran
                                   : key == "shape"         ? &shape
                                                            : nullptr;
      if (slot == nullptr) return Malformed("unknown key '", key, "' in the header");
      if (slot->has_value()) return Malformed("key '", key, "' appears twice in the header");
      KILN_ASSIGN_OR_RETURN(*slot, ParseValue());
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Malformed("expected ',' or '}' at byte ", pos_, " of the header");
    }
    SkipSpace();
    if (pos_ != text_.size()) {
      return Malformed("text after the header's dictionary at byte ", pos_, " of the header");
    }
    if (!descr) return Malformed("the header has no 'descr'");
    if (!fortran) return Malformed("the header has no 'fortran_order'");
    if (!shape) return Malformed("the header has no 'shape'");
    if (descr->kind != Value::Kind::kString) {
      return InvalidArgument(
          "unsupported dtype: 'descr' is not a simple type string (a "
          "structured array?)");
    }
    if (fortran->kind != Value::Kind::kBool) {
      return Malformed("'fortran_order' is not True or False");
    }
    if (fortran->boolean) {
      return InvalidArgument("fortran_order is True: only C-order arrays are supported");
    }
    if (shape->kind != Value::Kind::kTuple) return Malformed("'shape' is not a tuple of integers");
    Array array;
    KILN_ASSIGN_OR_RETURN(array.dtype, ParseDescr(descr->string));
    array.shape = std::move(shape->tuple);
    return array;
  }

 private:
  template <typename... Args>
  Status Malformed(const Args&... args) {
    return DataLoss("malformed header: ", args...);
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool EatWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  StatusOr<std::string> ParseString() {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Malformed("expected a quoted key or string at byte ", pos_, " of the header");
    }
    const size_t open = pos_;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) {
      return Malformed("the string at byte ", open, " of the header is not terminated");
    }
    std::string s(text_.substr(pos_, end - pos_));
    if (const size_t escape = s.find('\\'); escape != std::string::npos) {
      return Malformed("an escape in a string at byte ", pos_ + escape, " of the header");
    }
    pos_ = end + 1;
    return s;
  }
  StatusOr<Value> ParseValue() {
    SkipSpace();
    Value v;
    if (pos_ >= text_.size()) return Malformed("the header ends inside the dictionary");
    const char c = text_[pos_];
    if (c == '\'' || c == '"') {
      KILN_ASSIGN_OR_RETURN(v.string, ParseString());
      v.kind = Value::Kind::kString;
      return v;
    }
    if (EatWord("True")) {
      v.kind = Value::Kind::kBool;
      v.boolean = true;
      return v;
    }
    if (EatWord("False")) {
      v.kind = Value::Kind::kBool;
      return v;
    }
    if (c == '(') {
      ++pos_;
      v.kind = Value::Kind::kTuple;
      bool comma_after_last = false;
      while (true) {
        SkipSpace();
        if (Eat(')')) break;
        if (!v.tuple.empty() && !comma_after_last) {
          return Malformed("expected ',' or ')' in 'shape' at byte ", pos_, " of the header");
        }
        KILN_ASSIGN_OR_RETURN(uint64_t n, ParseInteger());
        v.tuple.push_back(n);
        SkipSpace();
        comma_after_last = Eat(',');
      }
      // Python's (3) is an integer, not a tuple: a one-item tuple needs its comma.
      if (v.tuple.size() == 1 && !comma_after_last) {
        return Malformed("'shape' (", v.tuple[0], ") is not a tuple: (", v.tuple[0], ",) is");
      }
      return v;
    }
    if (c == '[' || c == '{') {
      // A list (structured dtype) or a dict: skipped to its matching bracket.
      const size_t open = pos_;
      int depth = 0;
      for (; pos_ < text_.size(); ++pos_) {
        const char d = text_[pos_];
        if (d == '[' || d == '{' || d == '(') ++depth;
        if ((d == ']' || d == '}' || d == ')') && --depth == 0) {
          ++pos_;
          return v;
        }
      }
      return Malformed("the '", c, "' at byte ", open, " of the header is not closed");
    }
    return Malformed("unexpected '", c, "' at byte ", pos_, " of the header");
  }
  StatusOr<uint64_t> ParseInteger() {
    const size_t start = pos_;
    uint64_t n = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (n > (UINT64_MAX - digit) / 10) {
        return Malformed("the dimension at byte ", start, " of the header is beyond 64 bits");
      }
      n = n * 10 + digit;
      ++pos_;
    }
    // Python (so NumPy) reads no decimal with a leading zero but 0 itself
    // (00 is 0; 0100 is no int).
    if (pos_ - start > 1 && text_[start] == '0' && n != 0) {
      return Malformed("dimension '", text_.substr(start, pos_ - start), "' at byte ", start,
                       " of the header has a leading zero (not a Python int)");
    }
    // NumPy writes Python ints; 3L is the Python 2 spelling some files keep.
    if (pos_ < text_.size() && text_[pos_] == 'L' && pos_ > start) ++pos_;
    if (pos_ == start) {
      if (pos_ < text_.size() && text_[pos_] == '-') {
        return Malformed("a negative dimension in 'shape' at byte ", pos_, " of the header");
      }
      return Malformed("expected a dimension in 'shape' at byte ", pos_, " of the header");
    }
    return n;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string_view DescrOf(DType t) {
  return InfoOf(t).descr;
}
std::string_view NameOf(DType t) {
  return InfoOf(t).name;
}
uint32_t ItemSize(DType t) {
  return InfoOf(t).size;
}

uint64_t Array::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // Parse rejects products beyond 64 bits
  return n;
}

std::string Array::ShapeText() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += StrCat(i ? ", " : "", shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

StatusOr<Array> Parse(std::string_view bytes) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return DataLoss("not a .npy file (no \\x93NUMPY magic at its start)");
  }
  if (bytes.size() < 8) return DataLoss("truncated: the file ends inside the version");
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  const uint8_t minor = static_cast<uint8_t>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return InvalidArgument("unsupported .npy format version ", int{major}, ".", int{minor},
                           " (supported: 1.0, 2.0, 3.0)");
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) {
    return DataLoss("truncated: the file ends inside the header length");
  }
  uint64_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) {
    header_length |= uint64_t{static_cast<uint8_t>(bytes[8 + i])} << (8 * i);
  }
  const uint64_t data_start = 8 + length_bytes + header_length;
  if (bytes.size() < data_start) {
    return DataLoss("truncated: the header says it is ", header_length, " bytes, the file has ",
                    bytes.size() - 8 - length_bytes, " after the preamble");
  }
  std::string_view header = bytes.substr(8 + length_bytes, header_length);
  for (size_t i = 0; i < header.size(); ++i) {
    if (major < 3 && static_cast<unsigned char>(header[i]) >= 0x80) {
      return DataLoss("malformed header: byte ", i, " of the header is not ASCII (0x", std::hex,
                      static_cast<unsigned>(static_cast<unsigned char>(header[i])), std::dec,
                      "); version ", static_cast<int>(major), " headers are ASCII");
    }
  }
  KILN_ASSIGN_OR_RETURN(Array array, HeaderParser(header).Parse());
  uint64_t elements = 1;
  for (uint64_t d : array.shape) {
    if (d != 0 && elements > UINT64_MAX / d) {
      return DataLoss("shape ", array.ShapeText(), " has more elements than 64 bits count");
    }
    elements *= d;
  }
  uint64_t data_bytes = 0;
  if (__builtin_mul_overflow(elements, uint64_t{ItemSize(array.dtype)}, &data_bytes)) {
    return DataLoss("shape ", array.ShapeText(), " has more bytes than 64 bits count");
  }
  const uint64_t have = bytes.size() - data_start;
  if (have < data_bytes) {
    return DataLoss("truncated: shape ", array.ShapeText(), " of ", DescrOf(array.dtype), " needs ",
                    data_bytes, " bytes of data, the file has ", have);
  }
  if (have > data_bytes) {
    return DataLoss(have - data_bytes, " bytes after the data (shape ", array.ShapeText(), " of ",
                    DescrOf(array.dtype), " is ", data_bytes, " bytes)");
  }
  try {
    array.data.assign(bytes.substr(data_start));
  } catch (const std::bad_alloc&) {
    return OutOfMemory("no memory for ", data_bytes, " bytes of array data");
  }
  return array;
}

StatusOr<Array> ReadNpyFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadInputFile(path));
  auto array = Parse(bytes);
  if (!array.ok()) return array.status().WithContext(StrCat("'", path, "'"));
  return array;
}

StatusOr<std::string> Serialize(const Array& array) {
  uint64_t data_bytes = ItemSize(array.dtype);
  for (uint64_t d : array.shape) {
    if (__builtin_mul_overflow(data_bytes, d, &data_bytes)) {
      return InvalidArgument("shape ", array.ShapeText(), " has more bytes than 64 bits count");
    }
  }
  if (data_bytes != array.data.size()) {
    return InvalidArgument("shape ", array.ShapeText(), " of ", DescrOf(array.dtype), " is ",
                           data_bytes, " bytes, the data ", array.data.size());
  }
  std::string header = StrCat("{'descr': '", DescrOf(array.dtype),
                              "', 'fortran_order': False, 'shape': ", array.ShapeText(), ", }");
  // Pad with spaces and end with a newline so the data starts at a multiple of 64.
  size_t preamble = 10;
  int major = 1;
  if (header.size() + 1 + preamble + 64 > 65535) {
    preamble = 12;
    major = 2;
  }
  const size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';
  std::string out;
  try {
    out.reserve(total + array.data.size());
  } catch (const std::bad_alloc&) {
    return OutOfMemory("no memory for a .npy file of ", total + array.data.size(), " bytes");
  }
  out += kMagic;
  out += static_cast<char>(major);
  out += '\0';
  const uint64_t length = header.size();
  for (size_t i = 0; i < preamble - 8; ++i) out += static_cast<char>((length >> (8 * i)) & 0xff);
  out += header;
  out += array.data;
  return out;
}

Status WriteNpyFile(const std::string& path, const Array& array) {
  auto bytes = Serialize(array);
  if (!bytes.ok()) return bytes.status().WithContext(StrCat("'", path, "'"));
  return WriteFileAtomically(path, *bytes);
}

}  // namespace kiln::npy
