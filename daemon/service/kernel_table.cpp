// kernel_table: lookups, delivery and the bounded memory of delivered kernels' exits.
#include "daemon/service/kernel_table.hpp"

namespace kpool::daemon {

void kernel_table::add(const std::string& id, std::unique_ptr<kernel_process> process,
                       pool& owner) {
    m_records.emplace(id, record{std::move(process), &owner, false});
}

kernel_process* kernel_table::process(const std::string& id) const {
    auto it = m_records.find(id);
    return it == m_records.end() ? nullptr : it->second.process.get();
}

pool* kernel_table::pool_of(const std::string& id) const {
    auto it = m_records.find(id);
    return it == m_records.end() ? nullptr : it->second.owner;
}

void kernel_table::mark_delivered(const std::string& id) {
    if (auto it = m_records.find(id); it != m_records.end()) {
        it->second.delivered = true;
    }
}

kernel_process* kernel_table::delivered(const std::string& id) const {
    auto it = m_records.find(id);
    return it == m_records.end() || !it->second.delivered ? nullptr : it->second.process.get();
}

std::optional<exit_status> kernel_table::exit_of(const std::string& id) const {
    auto it = m_exits.find(id);
    return it == m_exits.end() ? std::nullopt : std::optional<exit_status>(it->second);
}

void kernel_table::remove_exited(const std::string& id, const exit_status& status) {
    auto it = m_records.find(id);
    if (it == m_records.end()) {
        return;
    }
    if (it->second.delivered) {
        m_exits.emplace(id, status);
        m_exit_order.push_back(id);
        if (m_exit_order.size() > remembered_exits) {
            m_exits.erase(m_exit_order.front());
            m_exit_order.pop_front();
        }
    }
    m_records.erase(it);
}

void kernel_table::for_each_process(const std::function<void(kernel_process&)>& fn) {
    for (auto& [id, r] : m_records) {
        fn(*r.process);
    }
}

} // namespace kpool::daemon
