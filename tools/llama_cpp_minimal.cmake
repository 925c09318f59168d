# llama.cpp as leap needs it: the library only. Included at llama.cpp's project() call (CMAKE_PROJECT_llama.cpp_INCLUDE),
# after llama-cpp-python forces LLAMA_BUILD_COMMON on: the common library (chat templates, argument parsing, jinja;
# ~50 of ~125 objects) is for llama.cpp's own tools, which the Python binding never loads. Used by setup.sh.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "" FORCE)
