// Enumerations named in configs, on the command line and in saved runs. Each enum E specialises EnumNames<E> with
// one table of {value, name}, which gives both directions: name_of(v) writes a value, parse_name<E>(text, where)
// reads one, and an unknown name is an error naming where it came from and the choices. C++17: the CUDA sources,
// which nvcc compiles as C++17, include model/config.h.
#pragma once
#include <array>
#include <cstddef>
#include <ostream>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/text.h"

namespace ms {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// Specialised per enum: static constexpr std::array<EnumName<E>, N> values.
template <class E>
struct EnumNames;

template <class E, class = void>
struct IsNamedEnum : std::false_type {};
template <class E>
struct IsNamedEnum<E, std::void_t<decltype(EnumNames<E>::values)>> : std::true_type {};
template <class E>
inline constexpr bool kNamedEnum = IsNamedEnum<E>::value;

template <class E, std::enable_if_t<kNamedEnum<E>, int> = 0>
const char* name_of(E value) {
  for (const EnumName<E>& n : EnumNames<E>::values)
    if (n.value == value) return n.name;
  MS_FAIL("unreachable: an enum value (", int(value), ") without a name");
}

// "a, b or c": the names in table order.
template <class E, std::enable_if_t<kNamedEnum<E>, int> = 0>
std::string choices_of() {
  std::string s;
  const auto& v = EnumNames<E>::values;
  for (size_t i = 0; i < v.size(); ++i) s += std::string(i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i].name;
  return s;
}

// The value called `text`; throws ms::Error "<where> '<text>' is unknown; use a, b or c".
template <class E, std::enable_if_t<kNamedEnum<E>, int> = 0>
E parse_name(const std::string& text, const std::string& where) {
  for (const EnumName<E>& n : EnumNames<E>::values)
    if (text == n.name) return n.value;
  MS_FAIL(where, " ", quote_text(text), " is unknown; use ", choices_of<E>());
}

template <class E, std::enable_if_t<kNamedEnum<E>, int> = 0>
std::ostream& operator<<(std::ostream& os, E value) {
  return os << name_of(value);
}

}  // namespace ms
