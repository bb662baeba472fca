// What kpool serve's parts need of the kpoolds it fronts: a control request to any of them (with
// failover) or to the one that handed out a kernel, and how long a refused caller should wait.
// The server provides it; holders of kernels (serve/kernel_leases.hpp) use only this.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace kpool::serve {

class control_service {
public:
    // The first daemon that answers, from the next in turn (an acquire: in client/spread's order,
    // most warm first), trying the next on a transport failure (no daemon there, no reply in
    // time). `done` once, with the daemon that answered.
    using control_done = std::function<void(result<nlohmann::json>, std::size_t daemon)>;
    virtual void control(nlohmann::json request, std::chrono::milliseconds timeout,
                         control_done done) = 0;
    // To one daemon, no failover (the requests about a kernel it handed out).
    virtual void control_at(std::size_t daemon, nlohmann::json request,
                            std::chrono::milliseconds timeout,
                            std::function<void(result<nlohmann::json>)> done) = 0;
    // Seconds a caller refused with 429 for `pool` ("": any) should wait: its turn, counted
    // (serve/wait_estimate.hpp), so each call is a refusal that takes a place in line.
    virtual int retry_after(const std::string& pool) = 0;

protected:
    ~control_service() = default;
};

} // namespace kpool::serve
