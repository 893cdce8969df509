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

# The C++ standard library's headers, precompiled once per target (CMake 3.16+,
# cmake.org/cmake/help/latest/command/target_precompile_headers.html): each of libllama's 42 C++
# compile steps (32 files and the models' 10 unity batches) parsed them again, about 2 s of the 3-4 s
# that GCC spends before it optimizes anything (-ftime-report: "phase parsing"). The list is the
# headers src/ includes most; a header a file does not use costs it only the PCH's load. CMake
# includes the PCH first (`-include cmake_pch.hxx`): no file of src/ or ggml-cpu defines anything
# before its first #include that a standard header reads (ggml-cpu's repack files define
# GGML_COMMON_*, read only by ggml-common.h). Measured alternately, alone on a 2-core AMD EPYC
# (docs/benchmarks.md): the whole compile 0.85x the CPU, the same decoded text at the same speed.
set(GCO_STD_HEADERS
  <algorithm> <array> <cassert> <cinttypes> <cmath> <cstdint> <cstdio> <cstring> <functional>
  <limits> <map> <memory> <set> <sstream> <stdexcept> <string> <unordered_map> <unordered_set>
  <vector>)
function(gco_precompiled_headers)
  # C++ only (ggml's targets compile C too); a `>` ends a generator expression, hence $<ANGLE-R>.
  set(headers "")
  foreach(header ${GCO_STD_HEADERS})
    string(REPLACE ">" "$<ANGLE-R>" header "${header}")
    list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
  endforeach()
  foreach(target llama ggml-base ggml-cpu)
    if(TARGET ${target} AND NOT MSVC)
      target_precompile_headers(${target} PRIVATE ${headers})
    endif()
  endforeach()
endfunction()
cmake_language(DEFER CALL gco_precompiled_headers)
