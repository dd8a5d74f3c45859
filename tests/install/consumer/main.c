/* Links the installed liboptireduce.so (CMake package or pkg-config) and calls its C API without
 * MPI: prints the version of the library loaded, then checks it against the header. */
#include <optireduce/optireduce.h>
#include <stdio.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)

int main(void) {
  const char *header = STR(OPTIREDUCE_VERSION_MAJOR) "." STR(OPTIREDUCE_VERSION_MINOR) "." STR(OPTIREDUCE_VERSION_PATCH);
  optireduce_process_stats stats;
  if (optireduce_get_process_stats(&stats) != 0 || stats.intercepted_calls != 0) return 1;
  printf("%s\n", optireduce_version());
  return strcmp(optireduce_version(), header) == 0 ? 0 : 1;
}
