// Plain C++ code with no Python dependency.
int probe_plain_answer() {
#ifdef PROBE_USE_MAGMA
  return 43;
#else
  return 42;
#endif
}
