// The registry of user ops, and the C entry points MPI_Op_create, MPI_Op_create_c (MPI 4) and
// MPI_Op_free that fill and empty it.
#include "user_ops.hpp"

#include <map>
#include <mutex>

#include "runtime.hpp"

namespace optireduce::pmpi {
namespace {

std::mutex g_mutex;
std::map<MPI_Op, UserOp> g_ops;  // guarded by g_mutex
std::uint64_t g_next_serial = 1;

struct ProbeCall {
  const UserOp& op;
  MPI_Datatype datatype;
};

void apply(void* context, void* in, void* inout, int len) {
  const auto& call = *static_cast<const ProbeCall*>(context);
  MPI_Datatype datatype = call.datatype;
  switch (call.op.convention) {
    case UserOp::Convention::c:
      reinterpret_cast<MPI_User_function*>(call.op.function)(in, inout, &len, &datatype);
      break;
    case UserOp::Convention::c_large: {
#if MPI_VERSION >= 4
      MPI_Count count = len;
      reinterpret_cast<MPI_User_function_c*>(call.op.function)(in, inout, &count, &datatype);
#endif
      break;
    }
    case UserOp::Convention::fortran: {
      MPI_Fint count = len, handle = PMPI_Type_c2f(datatype);
      reinterpret_cast<void (*)(void*, void*, MPI_Fint*, MPI_Fint*)>(call.op.function)(in, inout, &count, &handle);
      break;
    }
  }
}

}  // namespace

void register_user_op(MPI_Op op, UserOp::Convention convention, void (*function)(), int commute) {
  std::lock_guard lock(g_mutex);
  g_ops[op] = UserOp{g_next_serial++, convention, function, commute != 0};
}

void forget_user_op(MPI_Op op) {
  std::lock_guard lock(g_mutex);
  g_ops.erase(op);
}

std::optional<UserOp> find_user_op(MPI_Op op) {
  std::lock_guard lock(g_mutex);
  const auto it = g_ops.find(op);
  if (it == g_ops.end()) return std::nullopt;
  return it->second;
}

SumVerdict probe_user_op(const UserOp& op, MPI_Datatype datatype) {
  ProbeCall call{op, datatype};
  return probe_16bit_sum(&apply, &call);
}

}  // namespace optireduce::pmpi

using namespace optireduce::pmpi;

extern "C" {

// Registered whether or not the library is active: an op made before MPI_Init cannot exist, and
// one made while the mode is off may be used once a communicator opts in.
int MPI_Op_create(MPI_User_function* function, int commute, MPI_Op* op) {
  const int rc = PMPI_Op_create(function, commute, op);
  if (rc == MPI_SUCCESS && !NestedCallGuard::nested())
    register_user_op(*op, UserOp::Convention::c, reinterpret_cast<void (*)()>(function), commute);
  return rc;
}

#if MPI_VERSION >= 4
int MPI_Op_create_c(MPI_User_function_c* function, int commute, MPI_Op* op) {
  const int rc = PMPI_Op_create_c(function, commute, op);
  if (rc == MPI_SUCCESS && !NestedCallGuard::nested())
    register_user_op(*op, UserOp::Convention::c_large, reinterpret_cast<void (*)()>(function), commute);
  return rc;
}
#endif

int MPI_Op_free(MPI_Op* op) {
  if (op) forget_user_op(*op);
  return PMPI_Op_free(op);
}

}  // extern "C"
