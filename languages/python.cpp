// Python (ipykernel, xeus-python; papermill's pysparkkernel): its translator with papermill's
// inspect(), its cwd/env snippet (and the in-memory history of one-shot runs), its priming.
#include "languages/python.hpp"

#include "languages/builtin.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

// The history traits a shell's first stored cell reads for the first time: traitlets makes their
// defaults then, about a third of what a forked kernel's first cell costs above the next ones
// (bench/ scenario 21). Read beforehand: in the priming, and when history moves to memory. The
// zygote reads the same in its pre-built shell (daemon/process/zygote.py, FIRST_CELL_TRAITS). A
// macro, to be pasted into the Python sources below.
#define FIRST_CELL_TRAITS                                                                          \
    "('input_hist_raw', 'db_input_cache', 'db_output_cache', 'db_cache_size', 'db_log_output', "   \
    "'_i', '_ii', '_iii', '_i00')"

namespace kpool::languages {
namespace {

using params::ordered_value;
using params::parameter_info;

class python_translator final : public params::translator {
public:
    const char* name() const override { return "python"; }
    std::optional<std::vector<parameter_info>> inspect(const std::string& source) const override;

protected:
    std::string boolean(bool b) const override { return b ? "True" : "False"; }
    std::string floating(double d) const override {
        if (std::isfinite(d)) {
            return params::python_float_repr(d);
        }
        return std::isnan(d) ? "float('nan')" : d < 0 ? "float('-inf')" : "float('inf')";
    }
    std::string list(const ordered_value& v) const override { return "[" + join(v, ", ") + "]"; }
    std::string dict(const ordered_value& v) const override {
        return "{" +
               pairs(v, ", ",
                     [](const std::string& k, const std::string& x) { return k + ": " + x; }) +
               "}";
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*([A-Za-z_]\w*)\s*(:[^=]*)?=[^=])");
        return r;
    }
};

// papermill's PythonTranslator.inspect: assignments grouped with the lines that continue them
// (comments dropped but on the last line, whose comment is the help), then its pattern.
std::optional<std::vector<parameter_info>>
python_translator::inspect(const std::string& source) const {
    static const std::regex pattern(
        R"(^(\w[\w_]*)\s*(:\s*["']?(\w[\w_\[\],\s]*)["']?\s*)?=\s*(.*?)(\s*#\s*(type:\s*([^\s]*)\s*)?(.*))?$)");
    auto trim = [](const std::string& s) {
        const auto b = s.find_first_not_of(" \t\n\r\f\v");
        const auto e = s.find_last_not_of(" \t\n\r\f\v");
        return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    auto flatten = [&](const std::vector<std::string>& lines) {
        std::string flat;
        for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
            const auto hash = lines[i].find('#');
            flat += trim(hash == std::string::npos ? lines[i] : lines[i].substr(0, hash));
        }
        if (!lines.empty()) {
            flat += trim(lines.back());
        }
        return flat;
    };
    std::vector<std::string> groups;
    std::vector<std::string> accumulator;
    std::istringstream in(source);
    for (std::string line; std::getline(in, line);) {
        const std::string t = trim(line);
        if (t.empty() || t.starts_with("#")) {
            continue;
        }
        const auto equals = std::count(line.begin(), line.end(), '=');
        if (equals > 0) {
            groups.push_back(flatten(accumulator));
            accumulator.clear();
            if (equals > 1) {
                continue; // papermill: "Unable to parse line"
            }
        }
        accumulator.push_back(line);
    }
    groups.push_back(flatten(accumulator));
    std::vector<parameter_info> found;
    for (const std::string& definition : groups) {
        std::smatch m;
        if (definition.empty() || !std::regex_match(definition, m, pattern)) {
            continue;
        }
        const std::string type = m[3].matched ? m[3].str() : m[7].matched ? m[7].str() : "None";
        found.push_back(
            {trim(m[1].str()), trim(type), trim(m[4].str()), trim(m[8].matched ? m[8].str() : "")});
    }
    return found;
}

// One expression, so nothing is left in the user's namespace. Paths and values go in as UTF-8
// bytes: an embedded interpreter (xeus-python) in the C locale has an ASCII filesystem
// encoding and would refuse them as str. os.environb shares os.environ's data.
constexpr const char* python_context_template =
    R"((lambda os, ctx: (ctx["cwd"] is None or os.chdir(ctx["cwd"].encode()), )"
    R"([os.environb.__setitem__(k.encode(), v.encode()) for k, v in ctx["env"].items()]))()"
    R"(__import__("os"), __import__("json").loads({context})))";

result<std::string> python_context(const kernel_context& context) {
    std::string code = render_context_snippet(python_context_template, context);
    if (context.memory_history) {
        // After the cwd, so that the new _dh starts there; exec in a dict of its own leaves
        // nothing in the user's namespace.
        code += "\nexec(" + nlohmann::json(std::string(memory_history_python)).dump() + ", {})";
    }
    return code;
}

// ipykernel aborts only the requests that have arrived when a cell's error is sent, plus those
// arriving within stop_on_error_timeout (0 s by default: made for a front end's "Run All"). A
// cell sent ahead arrives well before any error as a rule, but a busy host can delay its send
// past an error in the cell before it; this window makes such a late one aborted all the same.
// A user expression, not a cell of its own: it costs the kernel no execute (about 2.5 ms).
// A kernel given this is used for one run (kpool run, kpool serve's /v1) and never again.
constexpr const char* abort_window_python =
    "setattr(__import__('IPython').get_ipython().kernel, 'stop_on_error_timeout', "
    "max(__import__('IPython').get_ipython().kernel.stop_on_error_timeout, 5.0))";

std::vector<nlohmann::json> python_priming() {
    // The cell runs through transform, compile and run_code; formatting the expression's value
    // builds the display formatters (the first cell's largest cost) without an execute_result
    // or `_`. Silent: a loud cell would also fire IPython's pre_run_cell/post_run_cell hooks.
    // Then what a loud cell reads first that a silent one never does: the shell's
    // ast_node_interactivity and its history's traits (FIRST_CELL_TRAITS).
    static const std::string first_cell_defaults =
        "exec(" +
        nlohmann::json(std::string("try:\n    ip = get_ipython()\n    ip.ast_node_interactivity\n"
                                   "    for name in " FIRST_CELL_TRAITS
                                   ":\n        getattr(ip.history_manager, name)\n"
                                   "except Exception:\n    pass\n"))
            .dump() +
        ", {})";
    return {traceless_execute("pass", true, {{"kpool_priming", "None"}}),
            traceless_execute(first_cell_defaults, true)};
}

} // namespace

const char* const memory_history_python = R"(
try:
    from IPython import get_ipython
    from IPython.core.history import HistoryManager
    ip = get_ipython()
except ImportError:
    ip = None
old = getattr(ip, "history_manager", None)
if old is not None and old.hist_file != ":memory:":
    thread = getattr(old, "save_thread", None)
    if thread is not None:
        # Told to end, not waited for (its join took up to 2 ms): nothing is cached for it to
        # write, and it closes its own connection as it goes.
        thread.stop_now = True
        old.save_flag.set()
    try:
        # No sync to disk for it: at worst, after a power cut, an empty session row is back.
        old.db.execute("PRAGMA synchronous = OFF")
        with old.db:
            old.db.execute("DELETE FROM sessions WHERE session = ?", (old.session_number,))
        old.db.close()
    except Exception:
        pass
    if old in ip.configurables:
        ip.configurables.remove(old)
    # A forked kernel's zygote made it as the kernel started (zygote_kernel.py).
    new = globals().get("kpool_prepared_history") or HistoryManager(shell=ip, parent=ip, hist_file=":memory:")
    ip.configurables.append(new)
    ip.history_manager = new
    names = {"_ih": new.input_hist_parsed, "In": new.input_hist_parsed, "_oh": new.output_hist,
             "Out": new.output_hist, "_dh": new.dir_hist}
    ip.user_ns.update(names)
    ip.user_ns_hidden.update(names)
    # The defaults the first cell would make (bench/ scenario 21): made here, off that cell.
    for name in )" FIRST_CELL_TRAITS R"(:
        getattr(new, name)
)";

const language& builtin::python() {
    static const python_translator translator;
    static const language row{
        .name = "Python",
        .spec_languages = {"python", "python3"},
        .translator_keys = {"python", "pysparkkernel"},
        .translator = &translator,
        .context_code = &python_context,
        .priming = &python_priming,
        .ipython_history = true,
        .aborting_implementations = {"ipython"},
        .abort_window_expression = abort_window_python,
    };
    return row;
}

} // namespace kpool::languages
