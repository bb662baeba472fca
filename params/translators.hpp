// Parameters as code in the notebook's language, papermill's translators rule for rule (without
// the optional Black formatting of Python): this base class holds papermill's Translator, the
// rules every language shares; each language's subclass is in its file in languages/, and
// languages/language.hpp finds the one for a kernel as papermill's registry does. Strings are
// escaped as Python's unicode_escape does, then quoted per language; floats as Python's repr;
// None as None/NULL/nothing/NaN/'' ...; lists and dicts as each language's literals.
#pragma once

#include "params/values.hpp"
#include "protocol/big_integer.hpp"
#include "protocol/result.hpp"

#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace kpool::params {

using ordered_value = nlohmann::ordered_json;

// One parameter of a parameters cell, as papermill's inspection infers it (--help-notebook).
struct parameter_info {
    std::string name;
    std::string inferred_type_name; // "None" when unknown
    std::string default_value;      // the source text
    std::string help;               // the trailing comment
};

class translator {
public:
    virtual ~translator() = default;
    // papermill's registry name: python, R, julia, bash, scala, matlab, .net-csharp, ...
    virtual const char* name() const = 0;

    // The injected cell's source: "<comment> Parameters\n" and one assignment per line, in
    // order. An error (bad_request) for a value the language cannot take (a dict in bash).
    result<std::string> codify(const parameters& values) const;

    // The names a parameters cell assigns, for the warning about unknown parameters.
    std::set<std::string> assigned_names(const std::string& source) const;

    // papermill's inspect(): the parameters a cell defines, or nothing where papermill's
    // translator cannot introspect (every language but Python).
    virtual std::optional<std::vector<parameter_info>> inspect(const std::string& source) const;

    // One value as a literal of the language.
    std::string literal(const ordered_value& v) const;

protected:
    // Thrown by a literal the language does not have (papermill: NotImplementedError); codify
    // turns it into its error.
    struct unsupported {
        std::string what;
    };

    virtual std::string none() const { return "None"; }
    virtual std::string boolean(bool b) const { return b ? "true" : "false"; }
    virtual std::string integer(const ordered_value& v) const { return integer_text(v); }
    virtual std::string floating(double d) const { return python_float_repr(d); }
    virtual std::string str(const std::string& s) const; // "..." with \" inside
    virtual std::string list(const ordered_value& v) const;
    virtual std::string dict(const ordered_value& v) const;
    virtual std::string comment(const std::string& text) const { return "# " + text; }
    virtual std::string assign(const std::string& name, const std::string& value) const {
        return name + " = " + value;
    }
    virtual std::string line_end() const { return "\n"; }
    // Matches an assignment at the start of a line; group 1 is the name.
    virtual const std::regex& assignment() const = 0;

    // Its digits, exactly, also beyond 64 bits (protocol/big_integer.hpp).
    static std::string integer_text(const ordered_value& v) {
        return protocol::is_big_integer(v) ? protocol::big_integer_digits(v) : v.dump();
    }
    // Python's str.encode("unicode_escape").decode(): backslash, \t, \n, \r escaped, printable
    // ASCII kept, every other code point as \xhh, \uhhhh or \Uhhhhhhhh. Quotes are left alone.
    static std::string unicode_escape(const std::string& utf8);
    static std::string replace_all(std::string s, const std::string& from, const std::string& to);
    // papermill's translate_escaped_str: unicode_escape'd, `"` replaced by `quote_escape`, quoted.
    static std::string quoted(const std::string& s, const std::string& quote_escape);
    // Outside a 32-bit int (Scala's and .NET's literals then take an L).
    static bool beyond_int32(const ordered_value& v);
    // The items' literals joined by `sep`.
    std::string join(const ordered_value& items, const std::string& sep) const;
    // A key: value list of a dict, each pair as `pair(key literal, value literal)`.
    template <class F>
    std::string pairs(const ordered_value& v, const std::string& sep, F pair) const {
        std::string out;
        for (const auto& [k, item] : v.items()) {
            out += (out.empty() ? "" : sep) + pair(str(k), literal(item));
        }
        return out;
    }
};

} // namespace kpool::params
