// Byte sizes as people write them on a command line ("80GiB", "1.5TB", "16MiB", "4096") and back; numbers for
// log lines.
#pragma once
#include <cstdint>
#include <string>

namespace ms {

// Parses a byte size: a non-negative number, optionally fractional, then an optional unit. Decimal units
// K/KB, M/MB, G/GB, T/TB (powers of 1000) and binary KiB, MiB, GiB, TiB (powers of 1024), case-insensitive;
// "B" or no unit means bytes. `what` names the option in the error, e.g. "--device-memory".
// Throws ms::Error naming the bad text and the accepted forms.
int64_t parse_bytes(const std::string& text, const std::string& what);

// Decimal, three significant digits: "1.47 TB", "141 GB", "12.6 MB", "512 B".
std::string format_bytes(double bytes);

// v with `digits` digits after the point ("%.*f"): times and rates in log lines.
std::string format_fixed(double v, int digits);

}  // namespace ms
