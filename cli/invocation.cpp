// Splitting the command line: global options anywhere, then the command's own.
#include "cli/invocation.hpp"

#include "cli/commands.hpp"

#include <algorithm>
#include <cstdlib>

namespace kpool::cli {
namespace {

struct option_spec {
    const char* name;
    option flag;
    bool takes_value;
};
constexpr option_spec command_options[] = {
    {"--json", opt_json, false}, {"--timeout", opt_timeout, true},   {"--lease", opt_lease, true},
    {"--cwd", opt_cwd, true},    {"--env", opt_env, true},           {"--pool", opt_pool, true},
    {"--wide", opt_wide, false}, {"--token-file", opt_remote, true}, {"--cacert", opt_remote, true},
};

const option_spec* find_option(const std::string& word) {
    for (const auto& o : command_options) {
        if (word == o.name) {
            return &o;
        }
    }
    return nullptr;
}

} // namespace

invocation parse_command_line(int argc, char** argv) {
    invocation inv;
    inv.endpoint = client::default_endpoint();
    inv.endpoint_given =
        std::getenv("KPOOL_ENDPOINT") != nullptr && *std::getenv("KPOOL_ENDPOINT") != '\0';
    if (const char* url = std::getenv("KPOOL_URL"); url != nullptr) {
        inv.url = url;
    }
    std::vector<std::string> rest; // every word but the global options, in order
    for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (word == "--") { // what follows is the command's own words, whatever they look like
            rest.insert(rest.end(), argv + i, argv + argc);
            break;
        }
        std::string* global = word == "--endpoint"          ? &inv.endpoint
                              : word == "--server-key"      ? &inv.server_key
                              : word == "--client-key-file" ? &inv.client_key_file
                              : word == "--url"             ? &inv.url
                                                            : nullptr;
        if (global != nullptr) {
            if (i + 1 >= argc) {
                throw usage_error{word + " needs a value"};
            }
            *global = argv[++i];
            inv.endpoint_given = inv.endpoint_given || global == &inv.endpoint;
        } else {
            rest.push_back(word);
        }
    }
    // The command is the first word that is neither an option nor an option's value.
    std::size_t at = 0;
    for (; at < rest.size(); ++at) {
        const std::string& w = rest[at];
        if (!w.starts_with("-")) {
            break;
        }
        if (const option_spec* o = find_option(w); o != nullptr && o->takes_value) {
            ++at;
        }
    }
    if (at < rest.size()) {
        inv.command = rest[at];
        inv.raw = rest;
        inv.raw.erase(inv.raw.begin() + static_cast<std::ptrdiff_t>(at));
    } else {
        inv.raw = rest;
    }
    return inv;
}

void parse_command_options(invocation& inv, const command& cmd) {
    if (cmd.own_parser) {
        return;
    }
    const std::vector<std::string>& words = inv.raw;
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (w == "--") { // the rest are words, not options: `kpool exec -- -x`
            inv.words.insert(inv.words.end(), words.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                             words.end());
            break;
        }
        const option_spec* o = find_option(w);
        if (o == nullptr) {
            if (w.size() > 1 && w.starts_with("-")) {
                throw usage_error{"unknown option " + w};
            }
            inv.words.push_back(w);
            continue;
        }
        if ((cmd.options & o->flag) == 0) {
            throw usage_error{std::string("kpool ") + cmd.name + " does not take " + w};
        }
        if (!o->takes_value) {
            (o->flag == opt_wide ? inv.wide : inv.as_json) = true;
            continue;
        }
        if (i + 1 >= words.size()) {
            throw usage_error{w + " needs a value"};
        }
        const std::string& value = words[++i];
        if (o->flag == opt_env) {
            const auto eq = value.find('=');
            if (eq == std::string::npos || eq == 0) {
                throw usage_error{"--env takes NAME=VALUE, not '" + value + "'"};
            }
            inv.env[value.substr(0, eq)] = value.substr(eq + 1);
        } else {
            inv.values[w] = value;
        }
    }
    if (inv.words.size() < cmd.min_words || inv.words.size() > cmd.max_words) {
        throw usage_error{std::string("usage: kpool ") + cmd.usage};
    }
}

client::curve_keys invocation::keys() const {
    auto loaded = client::load_curve_keys(server_key, client_key_file);
    if (!loaded) {
        throw usage_error{loaded.err().message};
    }
    return std::move(*loaded);
}

client::daemon_set invocation::daemons() const {
    auto endpoints = client::parse_endpoints(endpoint);
    if (!endpoints) {
        throw usage_error{endpoints.err().message};
    }
    return client::daemon_set(std::move(*endpoints), keys());
}

} // namespace kpool::cli
