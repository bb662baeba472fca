// kernel.json discovery and substitution, matching jupyter_client 7's behaviour.
#include "jupyter/kernelspec.hpp"

#include "jupyter/executable.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace kpool::jupyter {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// {prefix} is sys.prefix of the Python running jupyter_client; Debian's is /usr.
constexpr const char* python_prefix = "/usr";

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

void replace_all(std::string& s, std::string_view from, const std::string& to) {
    for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
        s.replace(pos, from.size(), to);
    }
}

bool is_identifier_char(char c, bool first) {
    return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
}

error spec_error(const std::string& name, const std::string& what) {
    return {errc::internal, "kernelspec '" + name + "': " + what};
}

} // namespace

std::vector<std::string> kernelspec_search_path() {
    std::vector<std::string> dirs;
    std::stringstream jupyter_path(env_or("JUPYTER_PATH", ""));
    for (std::string entry; std::getline(jupyter_path, entry, ':');) {
        if (!entry.empty()) {
            dirs.push_back(entry + "/kernels");
        }
    }
    const std::string home = env_or("HOME", "/");
    const std::string data_dir =
        env_or("JUPYTER_DATA_DIR", env_or("XDG_DATA_HOME", home + "/.local/share") + "/jupyter");
    dirs.push_back(data_dir + "/kernels");
    dirs.emplace_back("/usr/local/share/jupyter/kernels");
    dirs.emplace_back("/usr/share/jupyter/kernels");
    return dirs;
}

result<kernelspec> read_kernelspec(const std::string& dir, const std::string& name) {
    std::ifstream in(dir + "/kernel.json");
    if (!in) {
        return spec_error(name, "cannot read " + dir + "/kernel.json");
    }
    std::stringstream text;
    text << in.rdbuf();
    json j = json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return spec_error(name, dir + "/kernel.json is not a JSON object");
    }
    kernelspec spec;
    spec.name = name;
    spec.resource_dir = dir;
    const json& argv = j.value("argv", json::array());
    if (!argv.is_array() || argv.empty() ||
        !std::all_of(argv.begin(), argv.end(), [](const json& a) { return a.is_string(); })) {
        return spec_error(name, "'argv' must be a non-empty list of strings");
    }
    for (const auto& a : argv) {
        spec.argv.push_back(a.get<std::string>());
    }
    auto get_string = [&](const char* key, std::string fallback) {
        auto it = j.find(key);
        return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
    };
    spec.display_name = get_string("display_name", name);
    spec.language = get_string("language", "");
    spec.interrupt_mode = get_string("interrupt_mode", "signal");
    if (auto env = j.find("env"); env != j.end() && env->is_object()) {
        for (const auto& [k, v] : env->items()) {
            if (v.is_string()) {
                spec.env[k] = v.get<std::string>();
            }
        }
    }
    if (auto meta = j.find("metadata"); meta != j.end() && meta->is_object()) {
        spec.metadata = *meta;
    }
    return spec;
}

result<kernelspec> find_kernelspec(const std::string& name) {
    const std::string wanted = lower(name);
    for (const std::string& dir : kernelspec_search_path()) {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            if (lower(entry.path().filename().string()) == wanted &&
                fs::exists(entry.path() / "kernel.json", ec)) {
                return read_kernelspec(entry.path().string(), wanted);
            }
        }
    }
    return spec_error(name, "not found in any of the kernelspec directories (JUPYTER_PATH, " +
                                env_or("JUPYTER_DATA_DIR", "~/.local/share/jupyter") +
                                "/kernels, /usr/local/share/jupyter/kernels, "
                                "/usr/share/jupyter/kernels)");
}

std::vector<kernelspec> list_kernelspecs() {
    std::vector<kernelspec> specs;
    std::set<std::string> seen;
    for (const std::string& dir : kernelspec_search_path()) {
        std::error_code ec;
        std::vector<fs::path> entries;
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            entries.push_back(entry.path());
        }
        std::sort(entries.begin(), entries.end());
        for (const auto& path : entries) {
            const std::string name = lower(path.filename().string());
            if (seen.count(name) != 0 || !fs::exists(path / "kernel.json", ec)) {
                continue;
            }
            if (auto spec = read_kernelspec(path.string(), name)) {
                seen.insert(name);
                specs.push_back(std::move(*spec));
            }
        }
    }
    return specs;
}

std::vector<std::string> format_argv(const kernelspec& spec, const std::string& connection_file) {
    std::vector<std::string> argv = spec.argv;
    for (auto& arg : argv) {
        replace_all(arg, "{connection_file}", connection_file);
        replace_all(arg, "{resource_dir}", spec.resource_dir);
        replace_all(arg, "{prefix}", python_prefix);
    }
    return argv;
}

result<std::string> resolve_kernel_program(const kernelspec& spec, const std::string& python,
                                           const std::string& path_var) {
    if (spec.argv.empty()) {
        return spec_error(spec.name, "'argv' is empty");
    }
    const std::string& argv0 = spec.argv.front();
    const bool means_python = argv0 == "python" || argv0 == "python3";
    auto program = resolve_executable(means_python ? python : argv0, path_var);
    if (!program) {
        return spec_error(spec.name,
                          program.err().message +
                              (means_python ? " (argv[0] '" + argv0 +
                                                  "' means the pool's python = \"" + python + "\")"
                                            : std::string()));
    }
    return program;
}

result<resolved_kernelspec> resolve_pool_kernelspec(const std::string& name,
                                                    const std::string& python) {
    auto spec = find_kernelspec(name);
    if (!spec) {
        return spec.err();
    }
    auto program = resolve_kernel_program(*spec, python, env_or("PATH", ""));
    if (!program) {
        return program.err();
    }
    return resolved_kernelspec{std::move(*spec), std::move(*program)};
}

std::string expand_env_value(const std::string& value,
                             const std::map<std::string, std::string>& lookup) {
    std::string out;
    for (std::size_t i = 0; i < value.size(); ++i) {
        if (value[i] != '$' || i + 1 >= value.size()) {
            out += value[i];
            continue;
        }
        if (value[i + 1] == '$') {
            out += '$';
            ++i;
            continue;
        }
        const bool braced = value[i + 1] == '{';
        std::size_t start = i + (braced ? 2 : 1);
        std::size_t end = start;
        while (end < value.size() && is_identifier_char(value[end], end == start)) {
            ++end;
        }
        const bool well_formed =
            end > start && (!braced || (end < value.size() && value[end] == '}'));
        auto it = well_formed ? lookup.find(value.substr(start, end - start)) : lookup.end();
        if (it == lookup.end()) {
            out += value[i]; // safe_substitute keeps what it cannot substitute
            continue;
        }
        out += it->second;
        i = braced ? end : end - 1;
    }
    return out;
}

} // namespace kpool::jupyter
