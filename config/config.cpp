// TOML -> validated config, with file:line:col diagnostics for every kind of mistake: what each
// section holds and how its keys relate (the typed readers are config/toml_read.hpp's).
#include "config/config.hpp"

#include "config/section_readers.hpp"
#include "config/toml_read.hpp"
#include "kpool/default_config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace kpool::config {
namespace {

using namespace detail;

config read_config(const toml::table& root) {
    check_known_keys(root, "the top level", {"daemon", "pools", "serve"});
    config cfg;
    const toml::table none;
    const toml::table* daemon = sub_table(root, "daemon");
    cfg.daemon = read_daemon(daemon != nullptr ? *daemon
                                               : none); // an lvalue: no copy, which loses positions
    if (const toml::table* serve = sub_table(root, "serve")) {
        cfg.serve = read_serve(*serve);
    }
    const toml::table* pools = sub_table(root, "pools");
    if (pools == nullptr || pools->empty()) {
        fail(pools != nullptr ? pools->source() : root.source(),
             "no pools configured: add a [pools.NAME] table");
    }
    int total_size = 0;
    for (auto&& [key, node] : *pools) {
        const std::string name(key.str());
        if (!valid_pool_name(name)) {
            fail(key.source(),
                 "pool name '" + name + "' may hold only letters, digits, '-', '_', '.'");
        }
        if (!node.is_table()) {
            fail(node.source(), "'pools." + name + "' must be a table, not " + type_name(node));
        }
        cfg.pools.push_back(read_pool(name, *node.as_table(), cfg.daemon));
        total_size += cfg.pools.back().size;
        if (total_size > cfg.daemon.max_kernels) {
            const toml::node* size = node.as_table()->get("size");
            fail(
                size != nullptr ? size->source() : key.source(),
                "pool sizes add up to " + std::to_string(total_size) +
                    ", more than [daemon] max_kernels = " + std::to_string(cfg.daemon.max_kernels));
        }
    }
    return cfg;
}

std::string diagnostic(const std::string& source, const toml::source_position& where,
                       std::string_view message) {
    std::ostringstream out;
    out << source << ':' << std::max<toml::source_index>(where.line, 1) << ':'
        << std::max<toml::source_index>(where.column, 1) << ": " << message;
    return out.str();
}

} // namespace

std::vector<std::string> split_list(std::string_view text) {
    std::vector<std::string> out;
    std::string item;
    for (const char c : std::string(text) + ",") {
        if (c == ',' || c == ' ' || c == '\t') {
            if (!item.empty()) {
                out.push_back(std::move(item));
            }
            item.clear();
        } else {
            item += c;
        }
    }
    return out;
}

const pool_config* config::find_pool(std::string_view name) const {
    auto it =
        std::find_if(pools.begin(), pools.end(), [&](const auto& p) { return p.name == name; });
    return it != pools.end() ? &*it : nullptr;
}

result<config> parse_config(std::string_view toml_text, const std::string& source_name) {
    try {
        toml::table root = toml::parse(toml_text, source_name);
        return read_config(root);
    } catch (const toml::parse_error& e) {
        return error{errc::bad_request, diagnostic(source_name, e.source().begin, e.description())};
    } catch (const config_failure& f) {
        return error{errc::bad_request, diagnostic(source_name, f.where, f.message)};
    }
}

result<config> load_config_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return error{errc::bad_request, path + ":1:1: cannot read the file"};
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse_config(text.str(), path);
}

config default_config() {
    auto cfg = parse_config(default_config_text, "<embedded default config>");
    // The embedded text is ours and tested; failing here is a build mistake, not user input.
    if (!cfg) {
        throw std::logic_error(cfg.err().message);
    }
    return std::move(cfg).value();
}

} // namespace kpool::config
