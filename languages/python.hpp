// What the rest of kpool uses of the Python row directly.
#pragma once

namespace kpool::languages {

// Python that moves a running IPython kernel's history to a fresh in-memory HistoryManager:
// its sqlite session taken back out of the user's file, In/Out/_ih/_oh/_dh rebound. Run with
// exec() in a namespace of its own; harmless where there is no IPython or it is done already.
extern const char* const memory_history_python;

} // namespace kpool::languages
