// The options of every command that talks to a kpool serve (--url): `kpool feed`, and `kpool run`
// and `kpool exec` given --url. One parser, so the spellings and their checks are the same.
#pragma once

#include "cli/invocation.hpp"
#include "remote/feeder.hpp"

#include <string>
#include <vector>

namespace kpool::cli {

inline constexpr const char* remote_options_usage =
    R"(  --url URL                     the kpool serve (a global option; else $KPOOL_URL)
  --token-file FILE             its token: the file's first line (else $KPOOL_SERVE_TOKEN; else,
                                for a kpool serve on this host, the token it made for its port)
  --cacert FILE                 trust the PEM certificate(s) in FILE (a self-signed server's)
  --max-in-flight N             requests in flight at most (default 64); fewer while the server
                                queues them or answers 429
  --patience T                  how long a job that never ran (429, no connection) is sent
                                again before it fails (default 120s)
  --http2                       HTTP/2 streams over one TLS connection (https:// only) instead
                                of HTTP/1.1 keep-alive connections
)";

// Whether args[i] is one of those options: then it is read into `settings` (and `i` moved past
// its value). A wrong value is a usage_error.
bool take_remote_option(const std::vector<std::string>& args, std::size_t& i,
                        remote::feed_settings& settings, std::string& token_file);

// Finishes `settings` for `url`: checks it, reads the token (--token-file, $KPOOL_SERVE_TOKEN, or
// the one a kpool serve on this host wrote for its port). A usage_error when something is wrong.
void resolve_remote(const std::string& url, const std::string& token_file,
                    remote::feed_settings& settings);

// A token file's first line, trimmed; a usage_error naming `option` when there is none.
std::string read_token_file(const std::string& path, const std::string& option);

} // namespace kpool::cli
