// RAII for libuv handles: a handle's memory is freed only in its close callback, as libuv wants.
#pragma once

#include <uv.h>

#include <memory>

namespace kpool::daemon {

// Closes a handle and deletes the object that embeds it once libuv is done with it. `Owner` is a
// struct whose first member is the uv handle, so the handle pointer is the owner pointer.
template <class Owner> struct uv_close_deleter {
    void operator()(Owner* owner) const noexcept {
        auto* handle = reinterpret_cast<uv_handle_t*>(owner);
        if (uv_is_closing(handle) == 0) {
            uv_close(handle, [](uv_handle_t* h) { delete reinterpret_cast<Owner*>(h); });
        }
    }
};
template <class Owner> using uv_ptr = std::unique_ptr<Owner, uv_close_deleter<Owner>>;

} // namespace kpool::daemon
