#include "kiln/transform/lane_arith.h"

#include <algorithm>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/support/status.h"

namespace kiln::transform {
namespace {

using ir::BinaryNode;
using ir::BinaryOp;
using ir::BroadcastNode;
using ir::Expr;
using ir::RampNode;

// Scalar integer arithmetic with the folds index building needs (constants,
// + 0, * 1, * 0), done here rather than by the simplifier so that each pass's
// output is predictable on its own.
Expr Scalar(BinaryOp op, const Expr& a, const Expr& b) {
  auto ca = ir::AsConstInt(a);
  auto cb = ir::AsConstInt(b);
  if (a.dtype().is_integer()) {
    if (ca && cb) {
      // Wrap-around arithmetic, as the IR defines it; IntConst wraps to the type.
      uint64_t x = static_cast<uint64_t>(*ca), y = static_cast<uint64_t>(*cb);
      uint64_t r = op == BinaryOp::kAdd ? x + y : op == BinaryOp::kSub ? x - y : x * y;
      return ir::IntConst(a.dtype(), static_cast<int64_t>(r));
    }
    if (op == BinaryOp::kAdd && ca == 0) return b;
    if ((op == BinaryOp::kAdd || op == BinaryOp::kSub) && cb == 0) return a;
    if (op == BinaryOp::kMul && (ca == 1 || cb == 0)) return b;
    if (op == BinaryOp::kMul && (cb == 1 || ca == 0)) return a;
  }
  return BinaryNode::make(op, a, b);
}

Expr Lane(BinaryOp op, const Expr& a, const Expr& b) {
  int lanes = std::max<int>(a.dtype().lanes, b.dtype().lanes);
  if (lanes == 1) return Scalar(op, a, b);
  Expr va = BroadcastTo(a, lanes);
  Expr vb = BroadcastTo(b, lanes);
  const auto* ra = va.as<RampNode>();
  const auto* rb = vb.as<RampNode>();
  const auto* ba = va.as<BroadcastNode>();
  const auto* bb = vb.as<BroadcastNode>();
  if (ba && bb) return BroadcastNode::make(Scalar(op, ba->value, bb->value), lanes);
  if (op == BinaryOp::kAdd || op == BinaryOp::kSub) {
    if (ra && bb) return RampNode::make(Scalar(op, ra->base, bb->value), ra->stride, lanes);
    if (ba && rb) {
      Expr stride = op == BinaryOp::kAdd ? rb->stride
                                         : Scalar(op, ir::MakeZero(rb->stride.dtype()), rb->stride);
      return RampNode::make(Scalar(op, ba->value, rb->base), stride, lanes);
    }
    if (ra && rb) {
      return RampNode::make(Scalar(op, ra->base, rb->base), Scalar(op, ra->stride, rb->stride),
                            lanes);
    }
  }
  if (op == BinaryOp::kMul) {
    if (ra && bb) {
      return RampNode::make(Scalar(op, ra->base, bb->value), Scalar(op, ra->stride, bb->value),
                            lanes);
    }
    if (ba && rb) {
      return RampNode::make(Scalar(op, ba->value, rb->base), Scalar(op, ba->value, rb->stride),
                            lanes);
    }
  }
  return BinaryNode::make(op, va, vb);
}

}  // namespace

Expr FoldedAdd(const Expr& a, const Expr& b) {
  return Scalar(BinaryOp::kAdd, a, b);
}
Expr FoldedSub(const Expr& a, const Expr& b) {
  return Scalar(BinaryOp::kSub, a, b);
}
Expr FoldedMul(const Expr& a, const Expr& b) {
  return Scalar(BinaryOp::kMul, a, b);
}

Expr BroadcastTo(const Expr& e, int lanes) {
  if (e.dtype().lanes == lanes) return e;
  KILN_CHECK_MSG(e.dtype().lanes == 1, "cannot broadcast a ", e.dtype(), " to ", lanes, " lanes");
  return BroadcastNode::make(e, lanes);
}

Expr LaneAdd(const Expr& a, const Expr& b) {
  return Lane(BinaryOp::kAdd, a, b);
}
Expr LaneSub(const Expr& a, const Expr& b) {
  return Lane(BinaryOp::kSub, a, b);
}
Expr LaneMul(const Expr& a, const Expr& b) {
  return Lane(BinaryOp::kMul, a, b);
}

}  // namespace kiln::transform
