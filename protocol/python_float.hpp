// Python's repr of a float, which its json module writes too: the shortest digits that read
// back to the same double, scientific below 1e-4 and from 1e16 on, ".0" on integral values.
// Used wherever kpool must write a float byte for byte as Python would (notebooks, parameters).
#pragma once

#include <string>

namespace kpool::protocol {

// "nan", "inf" and "-inf" for the non-finite values, as repr() writes them.
std::string python_float_repr(double value);

} // namespace kpool::protocol
