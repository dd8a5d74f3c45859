// Whether the function of a user-defined reduction over 2-byte elements is an fp16 sum or a bf16
// sum, told from one run on known inputs. No MPI here: the caller hands the function over as
// `apply` (pmpi/user_ops.hpp binds the op's datatype and calling convention), so the logic is
// tested on its own (tests/unit/op_probe_test.cpp).
//
// The inputs are finite, non-zero normal numbers in both 16-bit formats (so also as the halves of
// a float32 or double): no NaN, infinity or subnormal reaches the function, and an op that traps
// on a NaN runs as it would on gradients. Every pair also comes swapped (an op that is not
// symmetric fails), results are never halfway between two neighbours (an op rounding ties another
// way still counts) but are rounded (an op that truncates does not), the length is odd (a vector
// loop and its tail both run), and the buffers have slack beyond the elements, which must come
// back untouched (an op on wider elements stays in memory the probe owns and fails).
#pragma once

namespace optireduce::pmpi {

enum class SumVerdict : int {
  none = 0,      // not an fp16 or bf16 sum, or the probe cannot tell
  float16 = 1,   // IEEE binary16 sum, rounded to nearest
  bfloat16 = 2,  // bfloat16 sum, rounded to nearest
};

// Runs the op under test as MPI runs a user op: inout[i] = in[i] op inout[i] for i < len, over
// 2-byte elements.
using ApplyOp = void (*)(void* context, void* in, void* inout, int len);

// Two runs of `apply` (fp16 inputs, bf16 inputs); a sum of exactly one of the formats is named.
SumVerdict probe_16bit_sum(ApplyOp apply, void* context);

const char* to_string(SumVerdict verdict);

}  // namespace optireduce::pmpi
