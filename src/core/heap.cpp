#include "core/heap.h"

#include <cstdlib>  // defines __GLIBC__ with glibc
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tritium {

void release_free_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace tritium
