#include "core/parallel.h"

#include <omp.h>

namespace ms {

int num_threads() { return omp_get_max_threads(); }

void set_num_threads(int n) { omp_set_num_threads(n); }

}  // namespace ms
