// Small consumer of libtorch (and optionally libtorch_python).
// Uses light headers rather than <torch/torch.h> (which takes minutes to
// compile on a busy CI machine): <ATen/Parallel.h> for a libtorch_cpu symbol
// and <torch/csrc/Layout.h> for a libtorch_python one. <torch/version.h>
// comes from include/torch/csrc/api/include, the second entry of
// TORCH_INCLUDE_DIRS, so both include dirs are exercised.
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdlib>
#include <iostream>

#ifdef WITH_TORCH_PYTHON
#include <torch/csrc/Layout.h>
#endif

int main() {
  at::init_num_threads();
  const int threads = at::get_num_threads();
  std::cout << "torch " << TORCH_VERSION << ": at::get_num_threads() = " << threads << '\n';
  if (threads < 1) {
    return EXIT_FAILURE;
  }
#ifdef WITH_TORCH_PYTHON
  // A data symbol of libtorch_python: the executable must link the library
  // and loading it must resolve its Python symbols (libpython is linked too).
  // Printing the address keeps the reference from being optimized away.
  std::cout << "torch_python: THPLayoutType at "
            << static_cast<const void*>(&THPLayoutType) << '\n';
#endif
  return EXIT_SUCCESS;
}
