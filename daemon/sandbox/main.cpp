// kpool-sandbox: puts one kernel in a sandbox of its own (daemon/sandbox/stages.hpp).
//
//   kpool-sandbox spawn SPEC_JSON -- ARGV...   a spawned kernel, all three stages
//   kpool-sandbox init SPEC_JSON GO_FD READY_FD LIFE_FD   a forked kernel's init (spawned by the
//   zygote's child) kpool-sandbox workdir PID SPEC_JSON CWD   CWD made the working directory of a
//   warm kernel (workdir.hpp)
//
// Exit status 125 when the sandbox could not be made (the reason on stderr, which is the
// kernel's log); otherwise the kernel's own.
#include "daemon/sandbox/stages.hpp"
#include "daemon/sandbox/workdir.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

int usage() {
    std::fputs("usage: kpool-sandbox spawn SPEC_JSON -- ARGV... | init SPEC_JSON GO_FD READY_FD "
               "LIFE_FD | workdir PID SPEC_JSON CWD\n",
               stderr);
    return 2;
}

kpool::protocol::sandbox_spec spec_or_exit(const char* text) {
    auto spec = kpool::protocol::parse_sandbox_spec(text);
    if (!spec) {
        std::fprintf(stderr, "kpool-sandbox: %s\n", spec.err().message.c_str());
        std::exit(125);
    }
    return std::move(spec).value();
}

int number(const char* text) { return static_cast<int>(std::strtol(text, nullptr, 10)); }

} // namespace

int main(int argc, char** argv) {
    const std::string_view mode = argc > 1 ? argv[1] : "";
    if (mode == "spawn" && argc > 4 && std::string_view(argv[3]) == "--") {
        kpool::sandbox::run_spawn(spec_or_exit(argv[2]),
                                  std::vector<std::string>(argv + 4, argv + argc));
    }
    if (mode == "init" && argc == 6) {
        kpool::sandbox::run_init(spec_or_exit(argv[2]), number(argv[3]), number(argv[4]),
                                 number(argv[5]));
    }
    if (mode == "workdir" && argc == 5) {
        // _exit: inside the kernel's mount namespace, /proc is its pid namespace's, where this
        // process has no entry; nothing may look for itself there on the way out (LeakSanitizer
        // does, in the sanitizer build, and fails the run).
        const int code =
            kpool::sandbox::run_workdir(number(argv[2]), spec_or_exit(argv[3]), argv[4]);
        std::fflush(stderr);
        ::_exit(code);
    }
    return usage();
}
