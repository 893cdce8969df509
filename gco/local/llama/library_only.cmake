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
