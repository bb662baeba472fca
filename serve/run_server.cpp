// run_server: the loop, the signals, the listening line, the orderly stop.
#include "serve/run_server.hpp"

#include "loop/uv_signal.hpp"
#include "serve/server.hpp"
#include "serve/token_file.hpp"

#include <csignal>

namespace kpool::serve {

int run_server(const serve_options& given, std::FILE* log) {
    // A client that hangs up while its answer streams (or is written) must not end the server:
    // the write fails with EPIPE instead, and the exchange learns the client is gone.
    std::signal(SIGPIPE, SIG_IGN);
    serve_options options = given;
    const bool generate = options.token.empty() && !options.no_token;
    if (generate) {
        options.token = new_token();
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    int code = 0;
    {
        auto started = server::start(&loop, options);
        std::unique_ptr<token_file> written;
        if (started && generate) {
            auto file = token_file::write(options.token_dir, (*started)->port(), options.token);
            if (!file) {
                started = error{file.err().code,
                                "a token is required (--no-token turns it off on loopback) and " +
                                    file.err().message + " (--token-file FILE gives one)"};
            } else {
                written = std::move(*file);
            }
        }
        if (!started) {
            std::fprintf(log, "kpool serve: %s\n", started.err().message.c_str());
            code = 1;
        } else {
            std::unique_ptr<server> s = std::move(*started);
            const std::string access = written                 ? "token in " + written->path()
                                       : options.token.empty() ? std::string("no token")
                                                               : std::string("token required");
            bool stopping = false;
            auto on_signal = [&](int) {
                if (stopping) { // again: no more grace
                    std::fprintf(log, "kpool serve: stopping now (running code interrupted)\n");
                    std::fflush(log);
                    s->stop_running_code();
                    return;
                }
                stopping = true;
                std::fprintf(log, "kpool serve: stopping (requests in flight finish first)\n");
                std::fflush(log);
                s->shut_down(options.stop_grace, [&] { uv_stop(&loop); });
            };
            loop::uv_signal sigint(&loop, SIGINT, on_signal);
            loop::uv_signal sigterm(&loop, SIGTERM, on_signal);
            // Said once the signals are ours: a caller may stop us as soon as it reads this line.
            std::fprintf(
                log, "kpool serve: listening on %s://%s:%d/ (kpoold: %zu endpoint%s; %s)\n",
                options.cert_file.empty() ? "http" : "https", options.host.c_str(), s->port(),
                options.endpoints.size(), options.endpoints.size() == 1 ? "" : "s", access.c_str());
            std::fflush(log);
            if (!is_loopback(options.host)) {
                s->warn_of_unsandboxed_pools([log](const std::string& line) {
                    std::fprintf(log, "kpool serve: %s\n", line.c_str());
                    std::fflush(log);
                });
            }
            uv_run(&loop, UV_RUN_DEFAULT);
            s.reset();
        }
    }
    // What the server and its connections closed: let their close callbacks run.
    uv_walk(
        &loop,
        [](uv_handle_t* h, void*) {
            if (!uv_is_closing(h)) {
                uv_close(h, nullptr);
            }
        },
        nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return code;
}

} // namespace kpool::serve
