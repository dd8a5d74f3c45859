#include "sum_format.hpp"

#include <array>
#include <cstdint>

#include "comm_engines.hpp"
#include "optireduce/log.hpp"
#include "user_ops.hpp"

namespace optireduce::pmpi {
namespace {

// Fortran REAL is its own handle; it is 4 bytes unless the program was built with a
// default-real-8 flag, which the size check catches.
bool is_float32(MPI_Datatype datatype) {
  if (datatype == MPI_FLOAT) return true;
  if (datatype != MPI_REAL && datatype != MPI_REAL4) return false;
  int size = 0;
  return PMPI_Type_size(datatype, &size) == MPI_SUCCESS && size == 4;
}

bool is_named_float16(MPI_Datatype datatype) {
#ifdef MPIX_C_FLOAT16
  if (datatype == MPIX_C_FLOAT16) return true;
#endif
  (void)datatype;
  return false;
}

// Named types whose bytes a 2-byte element may be made of.
bool is_byte_or_int16(MPI_Datatype t) {
  static const std::array kNamed = {MPI_BYTE,    MPI_CHAR,  MPI_SIGNED_CHAR,    MPI_UNSIGNED_CHAR, MPI_INT8_T,
                                    MPI_UINT8_T, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_INT16_T,       MPI_UINT16_T};
  for (MPI_Datatype named : kNamed)
    if (t == named) return true;
  return is_named_float16(t);
}

// Contiguous and dup constructors down to a named byte or 2-byte type.
bool built_of_bytes(MPI_Datatype t, int depth) {
  int integers = 0, addresses = 0, datatypes = 0, combiner = 0;
  if (PMPI_Type_get_envelope(t, &integers, &addresses, &datatypes, &combiner) != MPI_SUCCESS) return false;
  if (combiner == MPI_COMBINER_NAMED) return is_byte_or_int16(t);
  if ((combiner != MPI_COMBINER_CONTIGUOUS && combiner != MPI_COMBINER_DUP) || depth > 4 || datatypes != 1 ||
      integers > 1 || addresses > 0)
    return false;
  int count[1] = {0};
  MPI_Aint unused[1] = {0};
  MPI_Datatype inner[1] = {MPI_DATATYPE_NULL};
  if (PMPI_Type_get_contents(t, integers, addresses, datatypes, count, unused, inner) != MPI_SUCCESS) return false;
  const bool bytes = built_of_bytes(inner[0], depth + 1);
  // Derived types the call returns are the caller's to free; named ones must not be.
  int inner_integers = 0, inner_addresses = 0, inner_datatypes = 0, inner_combiner = 0;
  PMPI_Type_get_envelope(inner[0], &inner_integers, &inner_addresses, &inner_datatypes, &inner_combiner);
  if (inner_combiner != MPI_COMBINER_NAMED) PMPI_Type_free(&inner[0]);
  return bytes;
}

// Two bytes, no gaps, no offset, made of bytes or a 2-byte type: what carries a 16-bit float.
bool is_two_byte_element(MPI_Datatype datatype) {
  int size = 0;
  if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size != 2) return false;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (PMPI_Type_get_extent(datatype, &lb, &extent) != MPI_SUCCESS || lb != 0 || extent != 2) return false;
  if (PMPI_Type_get_true_extent(datatype, &true_lb, &true_extent) != MPI_SUCCESS || true_lb != 0 || true_extent != 2)
    return false;
  return built_of_bytes(datatype, 0);
}

bool is_predefined(MPI_Op op) {
  static const std::array kPredefined = {MPI_MAX,  MPI_MIN, MPI_SUM,  MPI_PROD,   MPI_LAND,   MPI_BAND,    MPI_LOR,
                                         MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_REPLACE, MPI_NO_OP};
  for (MPI_Op predefined : kPredefined)
    if (op == predefined) return true;
  return false;
}

// The agreed verdict of a (communicator, op), as cached: a SumVerdict, or this.
constexpr int kDisagreement = -1;

std::optional<PassReason> apply_verdict(int agreed, SumFormat& format) {
  if (agreed == kDisagreement) return PassReason::user_op_disagreement;
  if (agreed == static_cast<int>(SumVerdict::float16)) format.format = OPTIREDUCE_FORMAT_FLOAT16;
  else if (agreed == static_cast<int>(SumVerdict::bfloat16)) format.format = OPTIREDUCE_FORMAT_BFLOAT16;
  else return PassReason::user_op_not_sum;
  return std::nullopt;
}

// This rank's verdict on the op; none when it was freed meanwhile, or is not an fp16 sum where the
// datatype names fp16.
int local_verdict(const SumFormat& format, MPI_Datatype datatype, MPI_Op op) {
  const auto user = find_user_op(op);
  if (!user || user->serial != format.user_op_serial) return static_cast<int>(SumVerdict::none);
  const SumVerdict verdict = probe_user_op(*user, datatype);
  if (format.named_float16 && verdict != SumVerdict::float16) return static_cast<int>(SumVerdict::none);
  return static_cast<int>(verdict);
}

}  // namespace

SumFormat classify_sum(MPI_Datatype datatype, MPI_Op op) {
  SumFormat f;
  if (is_float32(datatype)) {
    if (op != MPI_SUM) f.pass = PassReason::op;
    return f;
  }
  f.named_float16 = is_named_float16(datatype);
  if (!f.named_float16 && !is_two_byte_element(datatype)) {
    f.pass = PassReason::datatype;
    return f;
  }
  f.format = OPTIREDUCE_FORMAT_FLOAT16;
  if (is_predefined(op)) {
    // A named fp16 sums with MPI_SUM; 2 bytes of anything else do not (an int16 sum is not ours).
    if (!f.named_float16) f.pass = PassReason::datatype;
    else if (op != MPI_SUM) f.pass = PassReason::op;
    return f;
  }
  const auto user = find_user_op(op);
  if (!user) f.pass = PassReason::user_op_unknown;
  // MPI promised such an op the ranks' order; the engine's one rounding would not keep it.
  else if (!user->commutative) f.pass = PassReason::user_op_not_sum;
  else f.user_op_serial = user->serial;
  return f;
}

std::optional<PassReason> settle_sum(SumFormat& format, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (format.user_op_serial == 0) return std::nullopt;
  CommState& state = comm_state(comm);
  {
    std::lock_guard lock(state.mutex);
    const auto it = state.sum_verdicts.find(format.user_op_serial);
    if (it != state.sum_verdicts.end()) return apply_verdict(it->second, format);
  }
  // First use on this communicator: every rank is here (the caller's checks decided alike).
  const int mine = local_verdict(format, datatype, op);
  const int sent[2] = {mine, -mine};
  int extremes[2] = {0, 0};
  if (PMPI_Allreduce(sent, extremes, 2, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return PassReason::arguments;
  const int agreed = extremes[0] == -extremes[1] ? extremes[0] : kDisagreement;
  {
    std::lock_guard lock(state.mutex);
    state.sum_verdicts[format.user_op_serial] = agreed;
  }
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  if (rank == 0 && agreed == kDisagreement)
    OR_LOG(warn, "the ranks' probes of a user-defined MPI_Op differ (is it the same function everywhere?); its calls "
                 "on this communicator go to the MPI");
  else if (rank == 0)
    OR_LOG(debug, "a user-defined MPI_Op over 2-byte elements: %s sum by every rank's probe",
           to_string(static_cast<SumVerdict>(agreed)));
  return apply_verdict(agreed, format);
}

const char* format_name(int format) {
  switch (format) {
    case OPTIREDUCE_FORMAT_FLOAT32: return "float32";
    case OPTIREDUCE_FORMAT_FLOAT16: return "float16";
    case OPTIREDUCE_FORMAT_BFLOAT16: return "bfloat16";
  }
  return "?";
}

}  // namespace optireduce::pmpi
