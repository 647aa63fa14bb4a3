# Injected into llama-cpp-python's build by `make install` (CMAKE_PROJECT_llama_cpp_INCLUDE, run
# when its top-level CMakeLists calls project()). Three changes to how llama.cpp compiles:
#
# 1. No AMX kernels. A native build on a CPU that reports AMX compiles ggml's AMX kernels, and
#    where the kernel does not grant the process AMX tile state (as on these machines) the first
#    tile instruction kills it with SIGILL. With the kernels in the build, the judge therefore
#    loads without llama.cpp's extra buffer types (cache/_llama_patches.py) and loses weight
#    repacking with them; without the kernels it keeps both. Explicit -mno-* options win over
#    the -march=native ggml adds later. Only where the compiler knows the options (x86).
# 2. No `common` library. llama-cpp-python forces llama.cpp's LLAMA_BUILD_COMMON cache option
#    on, which builds and installs `common` (the command-line tools' code, with cpp-httplib,
#    the HTTP client that downloads models): about half of the compile, nlohmann/json's and
#    httplib's headers being in every object. The Python package never loads it (it opens
#    libllama and libggml* only, and `common` lands outside its folder, in the wheel's top
#    `lib/`), and with LLAVA_BUILD=OFF nothing in the build links it. A normal variable of the
#    same name shadows the forced cache entry (policy CMP0126: setting a cache entry leaves a
#    normal variable alone) in llama.cpp's directories, so `common`, cpp-httplib and their
#    install rule are never added. If a caller builds mtmd (LLAVA_BUILD=ON), `common` stays in.
# 3. Optimisation only where the judge's time goes. libllama (model loading, the graph's
#    construction, the sampler chain) compiles at -O1: the arithmetic of a call is ggml's,
#    which keeps -O3, so a judge call takes as long and answers the same
#    (bench/bench_judge_call.py), and libllama compiles in about half the time. `common` and
#    cpp-httplib compile at -O0 where they are still built. The deferred call runs once the
#    top-level CMakeLists has added llama.cpp's targets; each option comes after the build
#    type's -O3 on the command line, so it wins.
include(CheckCCompilerFlag)
check_c_compiler_flag("-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" RAGAUDIT_NO_AMX_FLAGS)
if(RAGAUDIT_NO_AMX_FLAGS)
  add_compile_options(-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
endif()

if(DEFINED LLAVA_BUILD AND NOT LLAVA_BUILD)
  set(LLAMA_BUILD_COMMON OFF)
endif()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _ragaudit_optimisation)

function(_ragaudit_optimisation)
  foreach(target IN ITEMS llama-common cpp-httplib)
    if(TARGET ${target})
      target_compile_options(${target} PRIVATE -O0)
    endif()
  endforeach()
  if(TARGET llama)
    target_compile_options(llama PRIVATE -O1)
  endif()
endfunction()
