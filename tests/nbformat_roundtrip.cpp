// Test helper: reads a notebook file and writes it back to stdout with kpool's nbformat code, for
// comparing byte for byte with Python's nbformat.writes(nbformat.read(...)). Exit 2 with the
// reader's diagnostic for a file that is not a notebook.
#include "notebook/nbformat.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fputs("usage: nbformat_roundtrip NOTEBOOK\n", stderr);
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto nb = kpool::notebook::read_notebook(text.str(), argv[1]);
    if (!nb) {
        std::fprintf(stderr, "%s\n", nb.err().message.c_str());
        return 2;
    }
    std::fputs(kpool::notebook::write_notebook(*nb).c_str(), stdout);
    return 0;
}
