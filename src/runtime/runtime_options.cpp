#include "runtime/runtime_options.h"

#include "core/check.h"

namespace ms {

void RuntimeOptions::validate() const {
  if (recompute == Recompute::never && offload == Offload::stream)
    MS_FAIL(
        "--recompute never keeps every block's activations, which a streamed run cannot: its arena holds one "
        "block's; use --offload none or --recompute auto");
}

}  // namespace ms
