// kpoold's command line: run with a config file or the embedded default, or check a config.
#include "config/config.hpp"
#include "daemon/service/daemon.hpp"
#include "jupyter/kernelspec.hpp"
#include "kpool/default_config.hpp"
#include "kpool/version.hpp"
#include "loop/logging.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace {

constexpr const char* usage =
    R"(usage: kpoold [--config FILE]     run (without --config: the embedded default)
       kpoold --check-config FILE   validate FILE and exit (0 valid, 2 invalid)
       kpoold --print-default-config
       kpoold --version | --help
)";

int run_daemon(kpool::result<kpool::config::config> cfg, std::string config_path) {
    if (!cfg) {
        std::fprintf(stderr, "%s\n", cfg.err().message.c_str());
        return 2;
    }
    kpool::loop::set_log_level(cfg->daemon.log_level);
    // A client vanishing mid-write must not kill the daemon; libuv and libzmq report EPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    kpool::daemon::daemon d(std::move(cfg).value(), std::move(config_path));
    return d.run();
}

} // namespace

int main(int argc, char** argv) {
    try {
        const std::string_view arg1 = argc > 1 ? argv[1] : "";
        if (argc == 1) {
            return run_daemon(kpool::config::default_config(), {});
        }
        if (argc == 2 && (arg1 == "--help" || arg1 == "-h")) {
            std::fputs(usage, stdout);
            return 0;
        }
        if (argc == 2 && arg1 == "--version") {
            std::printf("kpoold %s (control protocol %d)\n", kpool::version,
                        kpool::control_protocol_version);
            return 0;
        }
        if (argc == 2 && arg1 == "--print-default-config") {
            std::fputs(kpool::config::default_config_text, stdout);
            return 0;
        }
        if (argc == 3 && arg1 == "--check-config") {
            auto cfg = kpool::config::load_config_file(argv[2]);
            if (!cfg) {
                std::fprintf(stderr, "%s\n", cfg.err().message.c_str());
                return 2;
            }
            // The kernels too: each pool's kernelspec found and its program there to run.
            bool runnable = true;
            for (const auto& pc : cfg->pools) {
                if (auto spec = kpool::jupyter::resolve_pool_kernelspec(pc.kernelspec, pc.python);
                    !spec) {
                    std::fprintf(stderr, "%s: pool '%s': %s\n", pc.kernelspec_at.c_str(),
                                 pc.name.c_str(), spec.err().message.c_str());
                    runnable = false;
                }
            }
            if (!runnable) {
                return 2;
            }
            std::printf("%s: ok (%zu pool%s, control %s)\n", argv[2], cfg->pools.size(),
                        cfg->pools.size() == 1 ? "" : "s", cfg->daemon.control.c_str());
            return 0;
        }
        if (argc == 3 && arg1 == "--config") {
            return run_daemon(kpool::config::load_config_file(argv[2]), argv[2]);
        }
        std::fputs(usage, stderr);
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kpoold: fatal: %s\n", e.what());
        return 1;
    }
}
