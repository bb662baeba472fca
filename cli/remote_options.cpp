// The options of the commands that talk to a kpool serve.
#include "cli/remote_options.hpp"

#include "cli/duration.hpp"
#include "config/paths.hpp"

#include <cstdlib>
#include <fstream>

namespace kpool::cli {

std::string read_token_file(const std::string& path, const std::string& option) {
    std::ifstream in(path);
    if (!in) {
        throw usage_error{option + ": cannot read " + path};
    }
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
        line.pop_back();
    }
    if (line.empty()) {
        throw usage_error{option + ": " + path + " holds no token"};
    }
    return line;
}

bool take_remote_option(const std::vector<std::string>& args, std::size_t& i,
                        remote::feed_settings& settings, std::string& token_file) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
        if (i + 1 >= args.size()) {
            throw usage_error{a + " needs a value"};
        }
        return args[++i];
    };
    if (a == "--token-file") {
        token_file = value();
    } else if (a == "--cacert") {
        settings.client.cacert = value();
    } else if (a == "--max-in-flight") {
        const std::string& n = value();
        const long v = number<long>(n, "--max-in-flight");
        if (v < 1 || v > 4096) {
            throw usage_error{"--max-in-flight takes a number from 1 to 4096, not '" + n + "'"};
        }
        settings.policy.max_in_flight = static_cast<std::size_t>(v);
    } else if (a == "--patience") {
        const std::string& t = value();
        const auto d = parse_duration(t, bare_unit::seconds, true);
        if (!d) {
            throw usage_error{duration_usage("--patience", t, bare_unit::seconds)};
        }
        settings.patience_s = std::chrono::duration<double>(d->value).count();
    } else if (a == "--http2") {
        settings.client.http2 = true;
    } else {
        return false;
    }
    return true;
}

void resolve_remote(const std::string& url, const std::string& token_file,
                    remote::feed_settings& settings) {
    std::string base = url;
    while (base.ends_with('/')) {
        base.pop_back();
    }
    if (const std::string wrong = remote::check_base_url(base); !wrong.empty()) {
        throw usage_error{"--url " + url + ": " + wrong};
    }
    settings.client.base_url = base;
    if (settings.client.http2 && !base.starts_with("https://")) {
        // H2O answers one HTTP/2 request with prior knowledge over plain TCP, then no more.
        throw usage_error{
            "--http2 needs an https:// URL: kpool serve speaks HTTP/2 over TLS (ALPN)"};
    }
    if (!token_file.empty()) {
        settings.client.token = read_token_file(token_file, "--token-file");
        return;
    }
    if (const char* token = std::getenv("KPOOL_SERVE_TOKEN"); token != nullptr && *token != '\0') {
        settings.client.token = token;
        return;
    }
    // A kpool serve on this host, run by this user, wrote the token it made to the runtime
    // directory (docs/serve.md): what `curl -H "$T"` would read by hand.
    std::string authority = base.substr(base.find("://") + 3);
    authority = authority.substr(0, authority.find('/'));
    const auto colon = authority.rfind(':');
    const std::string host = authority.substr(0, colon);
    if (colon != std::string::npos &&
        (host == "127.0.0.1" || host == "localhost" || host == "[::1]")) {
        const std::string made =
            config::default_runtime_dir() + "/serve-" + authority.substr(colon + 1) + ".token";
        if (std::ifstream(made)) {
            settings.client.token =
                read_token_file(made, "the token file of the kpool serve on this host");
        }
    }
}

} // namespace kpool::cli
