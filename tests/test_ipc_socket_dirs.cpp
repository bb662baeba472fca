// ipc_socket_dirs: socket prefixes short enough for every kernel, in the run directory when it
// fits, else in a short private directory that is listed for the crash cleanup and removed.
#include "daemon/process/ipc_socket_dirs.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace kpool::daemon;
namespace fs = std::filesystem;

namespace {

std::string make_dir(const std::string& path) {
    fs::create_directories(path);
    return path;
}

bool fits(const std::string& prefix) {
    return ("ipc://" + prefix + "-5").size() <= ipc_socket_dirs::max_endpoint;
}

} // namespace

TEST_SUITE("ipc_socket_dirs") {
    TEST_CASE("short names count in base 36") {
        CHECK(short_name(0) == "0");
        CHECK(short_name(35) == "z");
        CHECK(short_name(36) == "10");
        CHECK(short_name(36 * 36 * 36) == "1000");
    }

    TEST_CASE("a short run directory holds the sockets itself") {
        const std::string run = make_dir("/tmp/kpt" + std::to_string(::getpid() % 1000));
        {
            ipc_socket_dirs dirs(run, run, run + ".ipc");
            auto prefix = dirs.prefix_for("7");
            REQUIRE(prefix.ok());
            CHECK(*prefix == run + "/7");
        }
        CHECK_FALSE(fs::exists(run + ".ipc"));
        fs::remove_all(run);
    }

    TEST_CASE("a long one falls back to a short private directory, removed at the end") {
        const std::string root = make_dir("/tmp/kpool-ipc-test-" + std::to_string(::getpid()));
        const std::string run = make_dir(root + "/a/rather/long/run/directory/name");
        std::string short_dir;
        {
            ipc_socket_dirs dirs(run, root, root + "/run.ipc");
            auto prefix = dirs.prefix_for("1");
            REQUIRE(prefix.ok());
            CHECK(fits(*prefix));
            CHECK(prefix->starts_with("/tmp/kp-")); // the runtime dir is too long as well
            short_dir = fs::path(*prefix).parent_path().string();
            struct stat st {};
            REQUIRE(::stat(short_dir.c_str(), &st) == 0);
            CHECK((st.st_mode & 0777) == 0700);
            CHECK(*dirs.prefix_for("zz") == short_dir + "/zz"); // the same one again
            std::ifstream list(root + "/run.ipc");
            std::string line;
            std::getline(list, line);
            CHECK(line == short_dir);
        }
        CHECK_FALSE(fs::exists(short_dir));
        CHECK_FALSE(fs::exists(root + "/run.ipc"));
        fs::remove_all(root);
    }

    TEST_CASE("a short runtime directory is preferred to /tmp, and a dead run's list is swept") {
        const std::string root = make_dir("/tmp/kq" + std::to_string(::getpid() % 1000));
        const std::string run = make_dir(root + "/kernels/123456-abcdef01");
        std::string short_dir;
        {
            ipc_socket_dirs dirs(run, root, root + "/run.ipc");
            auto prefix = dirs.prefix_for("1");
            REQUIRE(prefix.ok());
            CHECK(prefix->starts_with(root + "/k"));
            CHECK(fits(*prefix));
            short_dir = fs::path(*prefix).parent_path().string();
            // A crash: the object's destructor never runs; copy the list as the sweep finds it.
            fs::copy_file(root + "/run.ipc", root + "/dead.ipc");
        }
        fs::create_directories(short_dir);
        remove_listed_ipc_dirs(root + "/dead.ipc");
        CHECK_FALSE(fs::exists(short_dir));
        CHECK_FALSE(fs::exists(root + "/dead.ipc"));
        fs::remove_all(root);
    }
}
