// protocol/pool_names: the one rule by which clients name a kernel.
#include "protocol/pool_names.hpp"

#include <doctest/doctest.h>

using kpool::protocol::resolve_pool_name;

TEST_SUITE("pool names") {
    TEST_CASE("a pool's own name, else a pool of that kernelspec, the warmest first") {
        const std::vector<kpool::protocol::pool_summary> pools = {{"py", "python3", 0},
                                                                  {"science", "python3", 2},
                                                                  {"plain", "python3", 2},
                                                                  {"python3", "xpython", 0}};
        CHECK(resolve_pool_name("py", pools) == "py"); // by name, though it has no warm kernel
        CHECK(resolve_pool_name("python3", pools) ==
              "python3"); // a pool's name wins over kernelspecs
        CHECK(resolve_pool_name("xpython", pools) == "python3");
        CHECK(!resolve_pool_name("ir", pools));
        const std::vector<kpool::protocol::pool_summary> two = {
            {"py", "python3", 0}, {"science", "python3", 2}, {"plain", "python3", 2}};
        CHECK(resolve_pool_name("python3", two) == "plain"); // most warm, then by name
        CHECK(resolve_pool_name("python3", {{"py", "python3", 0}}) == "py");
        CHECK(!resolve_pool_name("", two));
    }
}
