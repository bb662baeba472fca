// `kpool serve`: the HTTP front door's command line: options, the token, then serve/'s loop.
#include "cli/commands.hpp"
#include "cli/duration.hpp"
#include "cli/exit_status.hpp"
#include "cli/remote_options.hpp"
#include "client/daemon_set.hpp"
#include "config/config.hpp"
#include "config/config_keys.hpp"
#include "config/paths.hpp"
#include "protocol/text.hpp"
#include "serve/routing.hpp"
#include "serve/run_server.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace kpool::cli {
namespace {

constexpr const char* serve_usage_head = R"usage(usage: kpool [--endpoint E] serve [options]

Answers HTTP requests, each on a fresh warm kernel from kpoold, released after it
(docs/serve.md has every endpoint with curl examples):
)usage";

// One option's lines: "  --max-queue N" padded to the help column, then the help's lines.
std::string option_lines(std::string_view flag, std::string_view arg, std::string_view help) {
    return protocol::help_lines(std::string(flag) + (arg.empty() ? "" : " " + std::string(arg)),
                                help);
}

// After the endpoints (the route tables list them, serve/routing.hpp), the options: --config and
// --no-token, then every [serve] key's flag from its row (config/serve_keys.cpp).
std::string serve_usage() {
    std::string out =
        serve_usage_head + serve::endpoint_help() +
        "\noptions (each overrides its key in --config's [serve]):\n" +
        option_lines("--config", "FILE",
                     "kpool.toml: its [serve] section, and its [daemon] control as the\n"
                     "endpoint unless --endpoint or $KPOOL_ENDPOINT says otherwise") +
        option_lines("--no-token", "",
                     "no token (loopback only): then any local user, and any web page\n"
                     "that gets past the Host and Origin checks, may run code as you");
    for (const config::serve_flag_group& group : config::serve_flags()) {
        if (group.gateway) {
            out += "gateway options (as Kernel Gateway's flags; in [serve] as cull_idle_timeout_s, "
                   "...):\n";
        }
        for (const config::serve_flag& f : group.flags) {
            out += option_lines(f.flag, f.arg, f.help);
        }
    }
    return out;
}

struct bad_usage : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The token file's first line (cli/remote_options.hpp reads it for every client too).
std::string token_of(const std::string& path) {
    try {
        return read_token_file(path, "--token-file");
    } catch (const usage_error& e) {
        throw bad_usage(e.message);
    }
}

// A flag's text as its key's value (config::flag_kind says how), or the usage error.
config::flag_value flag_value_of(const config::serve_flag& f, const std::string& text) {
    switch (f.kind) {
    case config::flag_kind::toggle: return true;
    case config::flag_kind::integer: {
        std::int64_t n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec != std::errc() || end != text.data() + text.size()) {
            throw bad_usage(std::string(f.flag) + " needs a whole number, not '" + text + "'");
        }
        return n;
    }
    case config::flag_kind::seconds: {
        // Seconds, or a duration with its unit (cli/duration.hpp); the row checks the range.
        if (const auto d = parse_duration(text, bare_unit::seconds, true)) {
            return std::chrono::duration<double>(d->value).count();
        }
        throw bad_usage(duration_usage(std::string(f.flag), text, bare_unit::seconds));
    }
    case config::flag_kind::path:
        return std::filesystem::absolute(text).lexically_normal().string();
    case config::flag_kind::names: return serve::split_list(text);
    case config::flag_kind::text:
    case config::flag_kind::none: break;
    }
    return text;
}

// Sets the flag's key as the config file's value would be checked; the row's message names the
// key ('max_queue'), the usage error names the flag.
void set_key(serve::serve_options& o, const config::serve_flag& f,
             const config::flag_value& value) {
    if (auto st = config::set_serve_key(o, f.key, value); !st) {
        std::string message = st.err().message;
        const std::string quoted = "'" + std::string(f.key) + "'";
        if (const auto at = message.find(quoted); at != std::string::npos) {
            message.replace(at, quoted.size(), std::string(f.flag));
        }
        throw bad_usage(message);
    }
}

const config::serve_flag* find_flag(std::string_view name) {
    static const auto groups = config::serve_flags();
    for (const auto& group : groups) {
        for (const config::serve_flag& f : group.flags) {
            if (f.flag == name) {
                return &f;
            }
        }
    }
    return nullptr;
}

// `control` is the config's [daemon] control when --config names one.
serve::serve_options parse(const std::vector<std::string>& args, std::string& control) {
    serve::serve_options o;
    bool token_file_given = false, no_token_given = false;
    if (const char* token = std::getenv("KPOOL_SERVE_TOKEN"); token != nullptr) {
        o.token = token;
    }
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == "--config") {
            auto cfg = config::load_config_file(args[i + 1]);
            if (!cfg) {
                throw bad_usage(cfg.err().message);
            }
            static_cast<config::serve_config&>(o) = cfg->serve; // the flags override it below
            if (!o.token_file.empty()) {
                o.token = token_of(o.token_file);
            }
            control = cfg->daemon.control;
            if (!cfg->daemon.runtime_dir.empty()) {
                o.token_dir = cfg->daemon.runtime_dir;
            }
        }
    }
    // A flag given again adds to its list, and the flags' list replaces the file's.
    std::map<std::string_view, std::vector<std::string>> repeated;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--config") {
            if (++i >= args.size()) { // else read first, above
                throw bad_usage("--config needs a value");
            }
            continue;
        }
        if (a == "--no-token") {
            no_token_given = true;
            continue;
        }
        const config::serve_flag* f = find_flag(a);
        if (f == nullptr) {
            throw bad_usage("unknown option '" + a + "'");
        }
        std::string text;
        if (f->kind != config::flag_kind::toggle) {
            if (i + 1 >= args.size()) {
                throw bad_usage(a + " needs a value");
            }
            text = args[++i];
        }
        if (f->repeats) {
            repeated[f->flag].push_back(text);
            continue;
        }
        set_key(o, *f, flag_value_of(*f, text));
        if (f->key == "token_file") {
            o.token = token_of(o.token_file);
            token_file_given = true;
        }
    }
    for (const auto& [flag, texts] : repeated) {
        std::string joined;
        for (const std::string& t : texts) {
            joined += (joined.empty() ? "" : ",") + t;
        }
        const config::serve_flag& f = *find_flag(flag);
        set_key(o, f, flag_value_of(f, joined));
    }
    if (no_token_given && (token_file_given || std::getenv("KPOOL_SERVE_TOKEN") != nullptr)) {
        throw bad_usage(
            "--no-token and a token (--token-file, $KPOOL_SERVE_TOKEN) contradict each other");
    }
    if (no_token_given) {
        o.token.clear(); // over a config's token_file
        o.no_token = true;
    } else if (!o.token.empty()) {
        o.no_token = false; // a token given anywhere wins over a config's require_token = false
    }
    return o;
}

} // namespace

int serve_command_line(const invocation& inv) {
    for (const std::string& w : inv.raw) {
        if (w == "-h" || w == "--help") {
            std::fputs(serve_usage().c_str(), stdout);
            return exit_status::ok;
        }
    }
    serve::serve_options options;
    std::string control; // from --config
    try {
        options = parse(inv.raw, control);
    } catch (const bad_usage& e) {
        std::fprintf(stderr, "kpool serve: %s\n\n%s", e.what(), serve_usage().c_str());
        return exit_status::usage;
    }
    if (options.token_dir.empty()) {
        options.token_dir = config::default_runtime_dir();
    }
    options.endpoint_setting = !inv.endpoint_given && !control.empty() ? control : inv.endpoint;
    auto endpoints = client::parse_endpoints(options.endpoint_setting);
    if (!endpoints) {
        std::fprintf(stderr, "kpool serve: %s\n", endpoints.err().message.c_str());
        return exit_status::usage;
    }
    options.endpoints = std::move(*endpoints);
    options.keys = inv.keys();
    return serve::run_server(options, stderr) == 0 ? exit_status::ok : exit_status::failed;
}

} // namespace kpool::cli
