// The reduction optireduce-bench times: its element format and its collective, as a user's job
// makes them.
//
// float32 is MPI_FLOAT with MPI_SUM. The 16-bit formats follow Horovod's recipe (which mpi4py
// users copy): elements of MPI_Type_contiguous(2, MPI_BYTE) and an op of MPI_Op_create whose
// function widens to float32, adds and rounds to nearest (F16C where the CPU has it, as Horovod's
// build uses it). Open MPI reduces such a call with that function; OptiReduce recognises the op and
// serves it. The collective is MPI_Allreduce or MPI_Reduce_scatter_block; a reduce-scatter of n
// elements in gives each rank the n / ranks entries of its own block.
//
// The bench fills and checks float32 values (inputs.hpp: small integers, exact in both 16-bit
// formats and in any summation order) and converts them to and from the call's format outside
// the timed region.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace optireduce::bench {

enum class Format { f32, bf16, fp16 };
enum class Collective { allreduce, reduce_scatter_block };

Format parse_format(const std::string& name);              // "f32", "bf16", "fp16"
Collective parse_collective(const std::string& name);      // "allreduce", "reduce_scatter_block"
const char* format_name(Format f);
const char* collective_name(Collective c);

class Reduction {
 public:
  // Collective over comm: creates the datatype and the op of a 16-bit format.
  Reduction(Format format, Collective collective, MPI_Comm comm);
  Reduction(const Reduction&) = delete;
  Reduction& operator=(const Reduction&) = delete;

  std::size_t element_bytes() const { return format_ == Format::f32 ? 4 : 2; }
  // Entries of the result on this rank, and where they sit in the whole sum, for `count` in.
  std::size_t result_count(std::size_t count) const;
  std::size_t result_offset(std::size_t count) const;
  // The error that names a count this collective cannot take ("" when it can).
  std::string unfit_count(std::size_t count) const;

  // One call of `count` elements in: `send` holds them (or, in place, `recv` does; the result is
  // then at the start of `recv`). Returns the MPI return code.
  int run(const void* send, void* recv, std::size_t count, bool in_place) const;

  // float32 values into the call's format and back (exact for the bench's inputs).
  void to_wire(const float* in, void* out, std::size_t n) const;
  void from_wire(const void* in, float* out, std::size_t n) const;

 private:
  Format format_;
  Collective collective_;
  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1;
  MPI_Datatype type_ = MPI_FLOAT;
  MPI_Op op_ = MPI_SUM;
};

}  // namespace optireduce::bench
