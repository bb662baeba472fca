// libFuzzer target: the Jupyter wire-message parser (signature check, header/content JSON) on
// arbitrary frames. The input is split into frames at each "\n--\n"; the first frame is the
// HMAC key, so signed and unsigned, well- and badly-signed messages are all reachable.
#include "protocol/wire.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kpool;
    std::string_view rest(reinterpret_cast<const char*>(data), size);
    constexpr std::string_view separator = "\n--\n";
    std::vector<std::string> frames;
    while (frames.size() < 64) {
        const std::size_t at = rest.find(separator);
        frames.emplace_back(rest.substr(0, at));
        if (at == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(at + separator.size());
    }
    const std::string key = frames.front();
    frames.erase(frames.begin());
    auto msg = protocol::parse(frames, key);
    if (msg) {
        // Whatever parses must survive a round trip through serialize.
        auto again = protocol::parse(protocol::serialize(*msg, key), key);
        if (!again || again->msg_id() != msg->msg_id()) {
            std::abort();
        }
    }
    return 0;
}
