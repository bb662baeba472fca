// instance_dir: a run's locked directory, and the sweep that removes dead runs' files and
// processes but never a live run's.
#include "daemon/process/instance_dir.hpp"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace kpool::daemon;
namespace fs = std::filesystem;

namespace {

struct temp_root {
    std::string path;
    temp_root() {
        char tmpl[] = "/tmp/kpool-instance-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~temp_root() { fs::remove_all(path); }
};

// A forked process holding `run`'s directory and lock, as a daemon would, until killed.
pid_t run_in_child(const std::string& root, const std::string& marker_file) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        auto run = instance_dir::create(root);
        if (!run) {
            ::_exit(1);
        }
        std::ofstream(run->path() + "/kernel-x.json") << "{}";
        std::ofstream(marker_file) << run->id();
        ::pause();
        ::_exit(0);
    }
    while (!fs::exists(marker_file) || fs::file_size(marker_file) == 0) {
        ::usleep(1000);
    }
    return pid;
}

} // namespace

TEST_SUITE("instance_dir") {
    TEST_CASE("a run's directory and lock exist while it lives and go with it") {
        temp_root root;
        std::string path;
        {
            auto run = instance_dir::create(root.path);
            REQUIRE(run.ok());
            path = run->path();
            CHECK(fs::is_directory(path));
            CHECK((fs::status(path).permissions() & fs::perms::all) == fs::perms::owner_all);
            CHECK(fs::exists(path + ".lock"));
            std::ofstream(path + "/left-over") << "x";
            CHECK(sweep_stale_instances(root.path).runs == 0); // our own: locked
            CHECK(fs::exists(path));
        }
        CHECK_FALSE(fs::exists(path));
        CHECK_FALSE(fs::exists(path + ".lock"));
    }

    TEST_CASE("the sweep removes a dead run's files and spares a live one") {
        temp_root root;
        const pid_t live = run_in_child(root.path, root.path + "/live-id");
        const pid_t dead = run_in_child(root.path, root.path + "/dead-id");
        std::string live_id;
        std::string dead_id;
        std::ifstream(root.path + "/live-id") >> live_id;
        std::ifstream(root.path + "/dead-id") >> dead_id;
        ::kill(dead, SIGKILL); // like a SIGKILLed daemon: nothing cleaned up
        ::waitpid(dead, nullptr, 0);
        CHECK(fs::exists(root.path + "/" + dead_id + "/kernel-x.json"));

        const stale_sweep sweep = sweep_stale_instances(root.path);
        CHECK(sweep.runs == 1);
        CHECK_FALSE(fs::exists(root.path + "/" + dead_id));
        CHECK_FALSE(fs::exists(root.path + "/" + dead_id + ".lock"));
        CHECK(fs::exists(root.path + "/" + live_id + "/kernel-x.json"));
        CHECK(fs::exists(root.path + "/" + live_id + ".lock"));

        ::kill(live, SIGKILL);
        ::waitpid(live, nullptr, 0);
    }
}
