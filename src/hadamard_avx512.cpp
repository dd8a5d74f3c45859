// The transform's kernels built for the avx512 level (flags in CMakeLists.txt).
#include "hadamard_kernels.hpp"

OR_HADAMARD_KERNELS(avx512_kernels)
