// A kernel that kpool run starts itself, for one run, when no pool serves the notebook's
// kernelspec or no kpoold answers: cold, as papermill's would be, so a pipeline never breaks
// because a pool is missing. jupyter_client's KernelManager in small: the kernelspec found on
// the same search path, five free loopback ports, a connection file 0600 in a private 0700
// directory with a fresh key, the process in a group of its own with the caller's environment
// (the kernelspec's env on top) and working directory; shut down (shutdown_request, then
// SIGTERM, then SIGKILL to the group), reaped and its files removed when this object goes.
#pragma once

#include "jupyter/kernel_handle.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/result.hpp"

#include <zmq.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace kpool::runner {

class local_kernel final : public jupyter::kernel_handle {
public:
    struct request {
        std::string kernelspec;
        std::string cwd;
        std::map<std::string, std::string> env; // the whole environment, before the kernelspec's
        std::chrono::milliseconds ready_timeout{60000};
    };
    static result<std::unique_ptr<local_kernel>> start(const request& req);

    ~local_kernel() override;
    local_kernel(const local_kernel&) = delete;
    local_kernel& operator=(const local_kernel&) = delete;

    jupyter::kernel_client& client() override { return *m_client; }
    const nlohmann::json& kernel_info() const override { return m_kernel_info; }
    const std::string& id() const override { return m_id; }
    jupyter::execute_hooks hooks(std::function<bool()> cancelled) override;

private:
    local_kernel() = default;
    bool alive();
    void stop();

    std::string m_id;
    std::string m_dir; // the private directory holding the connection file
    std::string m_interrupt_mode = "signal";
    int m_pid = 0;
    bool m_reaped = false;
    protocol::connection_info m_info;
    zmq::context_t m_zmq;
    std::unique_ptr<jupyter::kernel_client> m_client;
    nlohmann::json m_kernel_info;
};

} // namespace kpool::runner
