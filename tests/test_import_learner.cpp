// The import learner (daemon/core/import_learner.hpp): what a pool's zygote should pre-import
// from its kernels' reports, refusals remembered, hysteresis, and the state that survives.
#include "daemon/core/import_learner.hpp"

#include <doctest/doctest.h>

using kpool::daemon::import_learner;
using names = std::vector<std::string>;

TEST_SUITE("import learner") {
    TEST_CASE(
        "nothing before min_kernels reports; then what half the window used, most used first") {
        import_learner l;
        l.kernel_used({"numpy", "pandas"}, {});
        l.kernel_used({"pandas", "numpy"}, {{"utils", "not an installed module (found in /nb)"}});
        CHECK(l.wanted().empty()); // 2 reports, fewer than 3
        l.kernel_used({"numpy", "scipy"}, {});
        CHECK(l.wanted() == names{"numpy", "pandas"}); // 3 of 3, 2 of 3; scipy 1 of 3 is not half
        const auto d = l.describe();
        CHECK(d["candidates"] == nlohmann::json{{"scipy", 1}});
        CHECK(d["not_installed"]["utils"] == "not an installed module (found in /nb)");
        CHECK(d["kernels_reported"] == 3);
    }

    TEST_CASE("a kernel that reports while it runs counts once, its latest report in its place") {
        import_learner l;
        l.kernel_used({"numpy"}, {}, 41, true);
        l.kernel_used({"numpy", "pandas"}, {}, 41, true); // the same kernel, later: replaces
        l.kernel_used({"pandas"}, {}, 42);
        CHECK(l.describe()["kernels_reported"] == 2);
        CHECK(l.describe()["window"] == 2);
        l.kernel_used({"numpy", "pandas"}, {}, 41, false); // as it ends: still one, now closed
        CHECK(l.reports() == 2);
        CHECK(l.wanted().empty());               // 2 kernels, fewer than 3
        l.kernel_used({"pandas"}, {}, 41, true); // a new kernel with the pid again: a new report
        CHECK(l.reports() == 3);
        CHECK(l.wanted() == names{"pandas"}); // 3 of 3; numpy 1 of 3
    }

    TEST_CASE("refusals are remembered and never wanted again; size-cap ones are tried at the next "
              "build") {
        import_learner l;
        for (int i = 0; i < 3; ++i) {
            l.kernel_used({"grpc", "numpy", "torch"}, {});
        }
        CHECK(l.wanted() == names{"grpc", "numpy", "torch"});
        l.built({"numpy"},
                {{"grpc", "starts a thread at import"},
                 {"torch", "over the zygote's size cap (1024 MB: 900 MB used, it takes 400)"}});
        CHECK(l.preloaded() == names{"numpy"});
        CHECK(l.wanted() == names{"numpy"}); // as it is: nothing to rebuild for
        CHECK(l.refused().at("grpc") == "starts a thread at import");
        // The state keeps the refusal on the module, not the one on what else the zygote held.
        CHECK(l.state()["refused"] == nlohmann::json{{"grpc", "starts a thread at import"}});
        l.built({"numpy", "torch"}, {});
        CHECK(l.refused().count("torch") == 0);
        CHECK(l.refused().count("grpc") == 1);
    }

    TEST_CASE(
        "a pre-imported module stays when kernels no longer show it (its use is hidden then)") {
        import_learner l({.window = 10, .min_kernels = 3, .learn_share = 0.5});
        for (int i = 0; i < 10; ++i) {
            l.kernel_used({"pandas", "pytz"}, {});
        }
        l.built({"pandas", "pytz"}, {});
        for (int i = 0; i < 10; ++i) {
            l.kernel_used({"pandas"}, {}); // pytz is in the zygote now: no kernel imports it
        }
        CHECK(l.wanted() == names{"pandas", "pytz"});
        l.built({"pandas", "pytz"}, {{"pytz", "the zygote did not pre-import it"}});
        CHECK(l.wanted() == names{"pandas"}); // only a refusal takes it out
    }

    TEST_CASE("what was learned survives a restart, and a half-read state is not an error") {
        import_learner before;
        for (int i = 0; i < 3; ++i) {
            before.kernel_used({"pandas"}, {});
        }
        before.built({"pandas"}, {{"grpc", "starts a thread at import"}});
        import_learner after;
        after.from_state(before.state());
        CHECK(after.preloaded() == names{"pandas"});
        CHECK(after.wanted() == names{"pandas"}); // before any report: kept
        CHECK(after.refused().at("grpc") == "starts a thread at import");
        import_learner odd;
        odd.from_state(
            nlohmann::json::parse(R"({"learned": [3, "", "numpy"], "refused": {"x": 1}})"));
        CHECK(odd.preloaded() == names{"numpy"});
        CHECK(odd.refused().empty());
        odd.from_state(nlohmann::json::array());
        CHECK(odd.preloaded() == names{"numpy"});
    }
}
