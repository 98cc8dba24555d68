# Which GPU backend to build when nobody chose one and the installed torch is a build for none
# of the backends build.toml declares (a CPU torch beside ROCm, the usual case for a ROCm-only
# kernel): the one declared GPU backend (rocm, cuda) whose compiler is here. This file is the one
# place of that rule: the build includes it (build2cmake_torch.cmake's backend selection) and
# `build2cmake build` runs it as a script before it configures, so both choose alike.
#
# As a script: cmake -DBUILD2CMAKE_DECLARED_BACKENDS=<;-list> -DBUILD2CMAKE_TORCH_BACKEND=<b>
#   [-DBUILD2CMAKE_TORCH_VERSION=<v>] -DBUILD2CMAKE_FIND_ROCM_MODULE=<path> -P <this file>
# prints (to stderr) backend=<chosen> and note=<the line saying so>, or found=<what compilers
# were found, in words> when zero or several backends qualify. It never fails.

include_guard(GLOBAL)
# Run as a script (cmake -P) there is no cmake_minimum_required: without this, CMake 3.x
# would read if(... IN_LIST ...) with its pre-3.3 rules. include() scopes it to this file.
cmake_policy(VERSION 3.26)

if(NOT BUILD2CMAKE_FIND_ROCM_MODULE)
  set(BUILD2CMAKE_FIND_ROCM_MODULE "${CMAKE_CURRENT_LIST_DIR}/build2cmake_find_rocm.cmake")
endif()

# nvcc as the cuda backend looks for it: $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda.
# Sets ${out} to its path, or to <out>-NOTFOUND.
function(build2cmake_find_nvcc out)
  find_program(nvcc nvcc
    HINTS "$ENV{CUDA_HOME}/bin" "$ENV{CUDA_PATH}/bin"
    PATHS /usr/local/cuda/bin
    NO_CACHE)
  set(${out} "${nvcc}" PARENT_SCOPE)
endfunction()

# Sets _b2c_auto_backend to the one GPU backend of `declared` (a list variable's name) whose
# compiler is here ("" when none or several are), _b2c_auto_found to what was found, in words,
# and _b2c_auto_note to the line that announces the choice. A macro: ROCm discovery's variables
# (_b2c_rocm_*) stay set for the rocm backend's module, which reuses them.
macro(build2cmake_auto_backend declared)
  set(_b2c_auto_backend "")
  set(_b2c_auto_candidates)
  set(_b2c_auto_found)
  if("rocm" IN_LIST ${declared})
    include("${BUILD2CMAKE_FIND_ROCM_MODULE}")
    if(_b2c_rocm_root)
      list(APPEND _b2c_auto_candidates rocm)
      list(APPEND _b2c_auto_found "rocm: ROCm ${_b2c_rocm_version} at ${_b2c_rocm_root}")
    else()
      list(JOIN _b2c_rocm_searched ", " _b2c_auto_searched)
      list(APPEND _b2c_auto_found "rocm: no HIP compiler (searched ${_b2c_auto_searched})")
    endif()
  endif()
  if("cuda" IN_LIST ${declared})
    build2cmake_find_nvcc(_b2c_auto_nvcc)
    if(_b2c_auto_nvcc)
      list(APPEND _b2c_auto_candidates cuda)
      list(APPEND _b2c_auto_found "cuda: nvcc at ${_b2c_auto_nvcc}")
    else()
      list(APPEND _b2c_auto_found
        "cuda: no nvcc (searched $CUDA_HOME, $CUDA_PATH, PATH, /usr/local/cuda)")
    endif()
  endif()
  list(JOIN _b2c_auto_found "; " _b2c_auto_found)
  if(NOT _b2c_auto_found)
    set(_b2c_auto_found "none (build.toml declares no GPU backend)")
  endif()
  list(LENGTH _b2c_auto_candidates _b2c_auto_count)
  set(_b2c_auto_note "")
  if(_b2c_auto_count EQUAL 1)
    set(_b2c_auto_backend "${_b2c_auto_candidates}")
    if(_b2c_auto_backend STREQUAL "rocm")
      set(_b2c_auto_torch "a ROCm build of torch")
    else()
      set(_b2c_auto_torch "a CUDA build of torch")
    endif()
    string(STRIP "torch ${BUILD2CMAKE_TORCH_VERSION}" _b2c_auto_installed)
    string(CONCAT _b2c_auto_note "build2cmake: building ${_b2c_auto_backend}, the one GPU "
      "backend of build.toml with a compiler here (${_b2c_auto_found}), since the installed "
      "${_b2c_auto_installed} is a ${BUILD2CMAKE_TORCH_BACKEND} build: the extension loads only "
      "under ${_b2c_auto_torch}")
  endif()
endmacro()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  build2cmake_auto_backend(BUILD2CMAKE_DECLARED_BACKENDS)
  if(_b2c_auto_backend)
    message(NOTICE "backend=${_b2c_auto_backend}")
    message(NOTICE "note=${_b2c_auto_note}")
  else()
    message(NOTICE "found=${_b2c_auto_found}")
  endif()
endif()
