#include "kiln/interp/value.h"

#include <ostream>
#include <sstream>

#include "kiln/interp/lane.h"
#include "kiln/interp/wgsl_semantics.h"

namespace kiln::interp {

Value Value::Int(ir::DataType dtype, int64_t value) {
  Value v;
  v.dtype = dtype;
  v.i = dtype.is_bool() ? (value != 0 ? 1 : 0)
                        : WrapInt(static_cast<uint64_t>(value), dtype.bits, dtype.is_int());
  return v;
}

Value Value::Float(ir::DataType dtype, double value) {
  Value v;
  v.dtype = dtype;
  v.f = ir::RoundToFloatType(dtype, value);
  return v;
}

int64_t Value::AsInt() const {
  if (dtype.is_float()) return FloatToInt(f, 64, true);
  return i;
}

double Value::AsDouble() const {
  if (dtype.is_float()) return f;
  if (dtype.is_uint() && dtype.bits == 64) return static_cast<double>(static_cast<uint64_t>(i));
  return static_cast<double>(i);
}

std::string Value::ToString() const {
  std::ostringstream os;
  if (dtype.is_float()) {
    os << f;
  } else if (dtype.is_bool()) {
    os << (i != 0 ? "true" : "false");
  } else if (dtype.is_uint() && dtype.bits == 64) {
    os << static_cast<uint64_t>(i);
  } else {
    os << i;
  }
  return os.str();
}

bool operator==(const Value& a, const Value& b) {
  if (a.dtype != b.dtype) return false;
  return a.dtype.is_float() ? a.f == b.f : a.i == b.i;
}

std::ostream& operator<<(std::ostream& os, const Value& v) {
  return os << v.ToString() << v.dtype.ToString();
}

HostBuffer::HostBuffer(ir::DataType dtype, std::vector<int64_t> shape)
    : dtype(dtype), shape(std::move(shape)) {
  int64_t count = 1;
  for (int64_t extent : this->shape) count *= extent;
  bytes.assign(static_cast<size_t>(count * dtype.StorageBytes()), 0);
}

int64_t HostBuffer::num_elements() const {
  return static_cast<int64_t>(bytes.size()) / dtype.StorageBytes();
}

Value HostBuffer::Get(int64_t index) const {
  const Lane lane = LoadElement(dtype, bytes.data() + index * dtype.StorageBytes());
  Value v;
  v.dtype = dtype;
  if (dtype.is_float()) {
    v.f = lane.f;
  } else {
    v.i = lane.i;
  }
  return v;
}

void HostBuffer::Set(int64_t index, const Value& value) {
  Lane lane;
  if (value.dtype.is_float()) {
    lane.f = value.f;
  } else {
    lane.i = value.i;
  }
  StoreElement(dtype, CastLane(value.dtype, dtype, lane),
               bytes.data() + index * dtype.StorageBytes());
}

}  // namespace kiln::interp
