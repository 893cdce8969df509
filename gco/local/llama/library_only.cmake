# Included by CMake at the end of llama.cpp's own `project("llama.cpp" ...)` call: llama_build passes
# -DCMAKE_PROJECT_llama.cpp_INCLUDE=<this file> ("a CMake language file to be included as the last
# step of all project() command calls that specify <PROJECT-NAME> as the project name", CMake 3.17+,
# cmake.org/cmake/help/latest/variable/CMAKE_PROJECT_PROJECT-NAME_INCLUDE.html).
#
# llama-cpp-python 0.3.36's CMakeLists.txt sets LLAMA_BUILD_COMMON ON with CACHE ... FORCE, so a
# -DLLAMA_BUILD_COMMON=OFF on the command line is overwritten. Its Python package loads only libllama
# and the ggml libraries (llama_cpp/llama_cpp.py); libllama-common (the command-line tools' argument
# parser, chat templates, jinja, the HTTP client: 51 of the 140 files compiled, and cpp-httplib) is
# built and shipped but never loaded. A normal variable set here, in llama.cpp's directory scope,
# shadows the cache entry: llama.cpp's `option(LLAMA_BUILD_COMMON ...)` then leaves it alone (policy
# CMP0077, NEW under its cmake_minimum_required 3.14...3.28), and both `add_subdirectory(common)` and
# `install(TARGETS llama-common)` are skipped.
set(LLAMA_BUILD_COMMON OFF)

# libllama's own C++ (model loading, the graph each model builds, the vocabulary, sampling) and ggml's
# base library (graph construction, the scheduler, GGUF parsing, the reference quantizers) at -O1:
# they are most of the compile (53 of the 78 compile steps, among them the 157 model files in 10 unity
# batches) but little of the run time, which is the CPU backend's kernels (ggml-cpu: ops, vec, the
# x86 quants, repack, llamafile's sgemm), left at the build type's -O3. Measured (docs/benchmarks.md):
# a file's compile about 30% less CPU, decoding within 5%, the same tokens. The call is deferred to the
# end of llama.cpp's directory, when src/ and ggml/ have defined the targets
# (cmake.org/cmake/help/latest/command/cmake_language.html#defer, CMake 3.19+; llama-cpp-python's
# pyproject asks scikit-build-core for 3.21+). A target's compile options come after the build type's
# flags on the compiler's command line, and GCC and Clang take the last -O.
function(gco_light_optimization)
  foreach(target llama ggml-base)
    if(TARGET ${target} AND NOT MSVC)
      target_compile_options(${target} PRIVATE -O1)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER CALL gco_light_optimization)
