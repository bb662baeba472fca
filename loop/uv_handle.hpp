// RAII for libuv handles, one idiom for every handle kpoold opens: a handle lives inside a heap
// object, `data` points back at that object, and the object is freed only in (or after) the
// handle's close callback, as libuv wants.
//
// - One handle: uv_ptr<Owner>, where the handle is Owner's first member (uv_timer, uv_signal,
//   the zygote's pipes, the spawner's wake-up).
// - Several handles whose callbacks share one object (a ZeroMQ socket's watchers, a spawned
//   process's pipes and exit watch): the object derives from uv_handle_group, adopts each handle
//   after its init, and is deleted after the last one closed, once it says it is releasable.
#pragma once

#include <uv.h>

#include <memory>

namespace kpool::loop {

// Closes a handle and deletes the object that embeds it once libuv is done with it. `Owner` is a
// struct whose first member is the uv handle, so the handle pointer is the owner pointer.
template <class Owner>
struct uv_close_deleter {
    void operator()(Owner* owner) const noexcept {
        auto* handle = reinterpret_cast<uv_handle_t*>(owner);
        if (uv_is_closing(handle) == 0) {
            uv_close(handle, [](uv_handle_t* h) { delete reinterpret_cast<Owner*>(h); });
        }
    }
};
template <class Owner>
using uv_ptr = std::unique_ptr<Owner, uv_close_deleter<Owner>>;

// The base of an object holding several handles (CRTP: `struct x final : uv_handle_group<x>`).
// Self provides `bool releasable() const`: true once nothing but its handles uses it.
template <class Self>
class uv_handle_group {
public:
    // After a successful uv_*_init: the handle points here and counts.
    template <class Handle>
    void adopt(Handle* handle) {
        handle->data = static_cast<Self*>(this);
        ++m_open;
    }
    // Closes an adopted handle (once); the last close may delete the object.
    template <class Handle>
    void close(Handle* handle) {
        auto* h = reinterpret_cast<uv_handle_t*>(handle);
        if (uv_is_closing(h) == 0) {
            uv_close(h, &closed);
        }
    }
    // Deletes the object if no handle is open and it is releasable (call when that changes).
    void delete_if_unused() {
        auto* self = static_cast<Self*>(this);
        if (m_open == 0 && self->releasable()) {
            delete self;
        }
    }

protected:
    uv_handle_group() = default;
    ~uv_handle_group() = default;

private:
    static void closed(uv_handle_t* h) {
        auto* self = static_cast<Self*>(h->data);
        --static_cast<uv_handle_group*>(self)->m_open;
        self->delete_if_unused();
    }
    int m_open = 0;
};

} // namespace kpool::loop
