// The rows registry.cpp lists, one function per language file (languages/<name>.cpp).
#pragma once

#include "languages/language.hpp"

#include <nlohmann/json.hpp>

#include <string_view>

namespace kpool::languages::builtin {

const language& python();
const language& r();
const language& julia();
const language& matlab(); // and Octave, which reads MATLAB's syntax
const language& bash();
const language& scala();
const language& csharp();
const language& fsharp();
const language& powershell();

} // namespace kpool::languages::builtin
