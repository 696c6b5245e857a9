#include "core/check.h"

namespace ms::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  throw Error(cat(msg.empty() ? std::string("check failed") : msg, " [", cond, " at ", file, ":", line, "]"));
}

}  // namespace ms::detail
