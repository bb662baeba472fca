// A value or an error: how kpool reports failures at its boundaries (parse -> validate -> act).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace kpool {

// Control-protocol error codes; also used inside the daemon so an error becomes a reply as is.
enum class errc {
    bad_request,
    unknown_op,
    unknown_pool,
    unknown_kernel,
    timeout,
    capacity,
    unavailable,
    shutting_down,
    internal,
};

const char* to_string(errc code) noexcept;

struct error {
    errc code = errc::internal;
    std::string message;
};

template <class T>
class [[nodiscard]] result {
public:
    result(T value) : m_v(std::move(value)) {}
    result(error e) : m_v(std::move(e)) {}

    bool ok() const noexcept { return m_v.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    T& value() & {
        assert(ok());
        return std::get<0>(m_v);
    }
    const T& value() const& {
        assert(ok());
        return std::get<0>(m_v);
    }
    T&& value() && {
        assert(ok());
        return std::get<0>(std::move(m_v));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const error& err() const {
        assert(!ok());
        return std::get<1>(m_v);
    }

private:
    std::variant<T, error> m_v;
};

// For operations that return nothing but may fail.
struct ok_t {};
using status = result<ok_t>;
inline status ok_status() { return ok_t{}; }

} // namespace kpool
