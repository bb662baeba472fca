// kpool exec's terminal: outputs shown as they come, and Python's SystemExit.
#include "cli/exec_output.hpp"

#include "protocol/python_json.hpp"

#include <unistd.h>

#include <cstdlib>

namespace kpool::cli {
namespace {

using json = nlohmann::json;

// sys.exit() and sys.exit(None): 0; sys.exit(N): N as the OS keeps it; sys.exit("text"): the
// text on stderr and 1.
int exit_code_of(const std::string& evalue) {
    if (evalue.empty() || evalue == "None") {
        return 0;
    }
    char* end = nullptr;
    const long n = std::strtol(evalue.c_str(), &end, 10);
    if (end != nullptr && *end == '\0') {
        return static_cast<int>(n & 0xff);
    }
    write_all(stderr, evalue + "\n");
    return 1;
}

} // namespace

void write_all(std::FILE* stream, const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stream);
    std::fflush(stream);
}

void show(const json& output) {
    const std::string type = output.value("output_type", "");
    if (type == "stream") {
        write_all(output.value("name", "") == "stderr" ? stderr : stdout, output.value("text", ""));
    } else if (type == "execute_result" || type == "display_data") {
        const json& data = output.value("data", json::object());
        if (auto text = data.find("text/plain"); text != data.end() && text->is_string()) {
            write_all(stdout, text->get<std::string>() + "\n");
        }
    } else if (type == "error") {
        write_all(stderr, protocol::traceback_text(output.value("traceback", json()),
                                                   ::isatty(STDERR_FILENO) != 0));
    }
}

bool python_exit::swallows(const json& output) {
    const std::string type = output.value("output_type", "");
    if (type == "error" && output.value("ename", "") == "SystemExit") {
        m_code = exit_code_of(output.value("evalue", ""));
        return true;
    }
    return m_code && type == "stream" && output.value("name", "") == "stderr" &&
           output.value("text", "").find("To exit: use 'exit', 'quit', or Ctrl-D.") !=
               std::string::npos;
}

} // namespace kpool::cli
