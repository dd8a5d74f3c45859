// The transform's kernels built for the scalar level (flags in CMakeLists.txt).
#include "hadamard_kernels.hpp"

OR_HADAMARD_KERNELS(scalar_kernels)
