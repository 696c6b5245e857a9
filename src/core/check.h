// Errors and checks. MS_CHECK is on in every build type.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace ms {

// A failure the user can act on; what() is one line naming the problem and the fix.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failed call of the GPU's runtime or libraries (backend/cuda/check.h): the device's fault, not the input's, so a
// verb that skips bad input (cache --on-bad-data skip) stops at it instead.
class DeviceError : public Error {
 public:
  using Error::Error;
};

template <class... A>
std::string cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace detail

}  // namespace ms

// Internal invariant or argument check; the message says which value is wrong.
#define MS_CHECK(cond, ...)                                                                     \
  do {                                                                                          \
    if (!(cond)) ::ms::detail::check_failed(__FILE__, __LINE__, #cond, ::ms::cat(__VA_ARGS__)); \
  } while (0)

// User-facing failure: a message naming the problem and what to do.
#define MS_FAIL(...) throw ::ms::Error(::ms::cat(__VA_ARGS__))
