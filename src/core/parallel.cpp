#include "core/parallel.h"

#include <omp.h>

namespace ms {

int num_threads() { return omp_get_max_threads(); }

}  // namespace ms
