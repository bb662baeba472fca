// The main() of the layer link checks (tests/layers/CMakeLists.txt): each check links one
// library whole, with only the libraries it declares, so a call into a layer it must not use
// is an undefined symbol and the build fails.
int main() { return 0; }
