// Everything of kiln's loop-level IR in one include.
#pragma once

#include "kiln/ir/buffer.h"
#include "kiln/ir/builder.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/function.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/stmt.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/types.h"
#include "kiln/ir/verifier.h"
#include "kiln/ir/visitor.h"
