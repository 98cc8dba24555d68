# Finds a ROCm installation and the HIP compiler that matches its device libraries, with no
# variables from the user. This file is the one place that knows where ROCm lives: the generated
# build includes it, and `build2cmake doctor` runs it as a script (cmake -P), so both always agree.
#
# Roots, first hit wins: -DBUILD2CMAKE_ROCM_PATH, $ROCM_PATH, $HIP_PATH, /opt/rocm, /usr. In each
# root the layouts below are tried in order:
#
#   rocm          a ROCm release tree (/opt/rocm, 5.x and 6.x): <root>/lib/llvm/bin/clang++ (6.x)
#                 or <root>/llvm/bin/clang++ (5.x); $HIP_PATH may point at <root>/hip. The
#                 compiler finds the device libraries itself from --rocm-path.
#   multiarch     Debian 12 / Ubuntu 22.04 packages (ROCm 5.2-5.5): device bitcode under
#                 <root>/lib/<multiarch>/amdgcn/bitcode, compiler clang++-N where hipcc.pl names N.
#   llvm-N        Debian trixie / Ubuntu 24.04 (ROCm 5.7, clang-17) and Debian sid (ROCm 6.4,
#                 clang-21): device bitcode inside the distribution's LLVM,
#                 <root>/lib/llvm-N/lib/clang/N/amdgcn/bitcode, compiler <root>/lib/llvm-N/bin/clang++.
#
# Sets, for the first ROCm found:
#   _b2c_rocm_root      the ROCm prefix, passed to the compiler as --rocm-path
#   _b2c_rocm_layout    "rocm" (a release tree) or "distribution" (distribution packages)
#   _b2c_rocm_layout_detail   which row above matched, in words
#   _b2c_rocm_compiler  the HIP compiler (clang++)
#   _b2c_rocm_libdir    libamdhip64 & co.
#   _b2c_rocm_cmakedir  the CMake packages (hip, hip-lang, amd_comgr)
#   _b2c_rocm_bitcode   the device bitcode folder to pass explicitly ("" when the compiler finds it)
#   _b2c_rocm_version   the HIP version from <root>/include/hip/hip_version.h (e.g. 6.4.43484)
#   _b2c_rocm_thrust    <root>/include/thrust/complex.h when rocThrust is installed, else "": torch's
#                       headers include it when compiled by a HIP compiler (see below)
#   BUILD2CMAKE_ROCM_OFFLOAD_FLAGS  extra HIP compile options for device code: --offload-compress
#                       on ROCm >= 6.2 (code objects for several archs shrink several times)
#
# Included by a build, a ROCm that cannot be found is a configure error naming what was searched.
# Run as `cmake -P build2cmake_find_rocm.cmake`, it prints searched=<roots> and, when a ROCm is
# found, the variables above as NAME=VALUE lines (to stderr), and never fails.

include_guard(GLOBAL)

set(BUILD2CMAKE_ROCM_PATH "" CACHE PATH "ROCm installation to build with (default: searched)")

# The HIP version a ROCm tree's headers declare, or "" when it has no hip_version.h.
function(_b2c_hip_header_version root out)
  set(version "")
  set(header "${root}/include/hip/hip_version.h")
  if(EXISTS "${header}")
    file(STRINGS "${header}" lines REGEX "^#define HIP_VERSION_(MAJOR|MINOR|PATCH) ")
    foreach(part IN ITEMS MAJOR MINOR PATCH)
      if(lines MATCHES "HIP_VERSION_${part} ([0-9]+)")
        list(APPEND version "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    list(JOIN version "." version)
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# The multiarch library folder of a distribution root: CMake knows it inside a project; in script
# mode (doctor) take the one that holds HIP's CMake package.
function(_b2c_multiarch_libdir root out)
  if(CMAKE_LIBRARY_ARCHITECTURE)
    set(${out} "${root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}" PARENT_SCOPE)
    return()
  endif()
  file(GLOB found LIST_DIRECTORIES true "${root}/lib/*-linux-gnu*/cmake/hip")
  list(SORT found)
  if(found)
    list(GET found 0 first)
    get_filename_component(libdir "${first}/../.." ABSOLUTE)
    set(${out} "${libdir}" PARENT_SCOPE)
  else()
    set(${out} "${root}/lib/${CMAKE_HOST_SYSTEM_PROCESSOR}-linux-gnu" PARENT_SCOPE)
  endif()
endfunction()

function(_b2c_find_rocm)
  set(candidates)
  foreach(root IN ITEMS "${BUILD2CMAKE_ROCM_PATH}" "$ENV{ROCM_PATH}" "$ENV{HIP_PATH}" /opt/rocm /usr)
    if(root)
      list(APPEND candidates "${root}")
    endif()
  endforeach()
  set(_b2c_rocm_searched "${candidates}" PARENT_SCOPE)
  foreach(root IN LISTS candidates)
    # Layout "rocm": ROCm >= 6 ships its LLVM under lib/llvm, ROCm 5 under llvm.
    foreach(llvm IN ITEMS "${root}/lib/llvm" "${root}/llvm" "${root}/../llvm")
      if(EXISTS "${llvm}/bin/clang++")
        get_filename_component(rocm "${llvm}/.." ABSOLUTE)
        if(root MATCHES "/hip/?$")
          get_filename_component(rocm "${root}/.." ABSOLUTE)
        elseif(NOT llvm STREQUAL "${root}/../llvm")
          set(rocm "${root}")
        endif()
        _b2c_hip_header_version("${rocm}" version)
        set(_b2c_rocm_root "${rocm}" PARENT_SCOPE)
        set(_b2c_rocm_layout "rocm" PARENT_SCOPE)
        set(_b2c_rocm_layout_detail "ROCm release tree" PARENT_SCOPE)
        set(_b2c_rocm_compiler "${llvm}/bin/clang++" PARENT_SCOPE)
        set(_b2c_rocm_libdir "${rocm}/lib" PARENT_SCOPE)
        set(_b2c_rocm_cmakedir "${rocm}/lib/cmake" PARENT_SCOPE)
        set(_b2c_rocm_bitcode "" PARENT_SCOPE)
        set(_b2c_rocm_version "${version}" PARENT_SCOPE)
        return()
      endif()
    endforeach()

    # The distribution layouts all have HIP's headers in <root>/include.
    if(NOT EXISTS "${root}/include/hip/hip_runtime.h")
      continue()
    endif()
    _b2c_multiarch_libdir("${root}" libdir)
    _b2c_hip_header_version("${root}" version)
    set(compiler "")
    set(bitcode "")
    # Layout "multiarch" (Debian 12): the distribution's hipcc.pl names the clang its device
    # libraries were built with; a newer or older clang may not read that bitcode.
    if(EXISTS "${libdir}/amdgcn/bitcode")
      set(names clang++)
      if(EXISTS "${root}/bin/hipcc.pl")
        file(STRINGS "${root}/bin/hipcc.pl" lines REGEX "clang\\+\\+-[0-9]+")
        if(lines MATCHES "clang\\+\\+-([0-9]+)")
          set(names "clang++-${CMAKE_MATCH_1}")
        endif()
      endif()
      find_program(found NAMES ${names} HINTS "${root}/bin" NO_CACHE)
      if(found)
        set(compiler "${found}")
        set(bitcode "${libdir}/amdgcn/bitcode")
        set(detail "distribution packages, bitcode in lib/<multiarch>/amdgcn")
      endif()
    endif()
    # Layout "llvm-N" (Debian trixie and sid, Ubuntu 24.04): the device libraries were built
    # into one LLVM's resource folder; that LLVM's clang++ is the one to use. The newest wins
    # when several are installed, as the distribution's hipcc does.
    if(NOT compiler)
      file(GLOB bitcodes LIST_DIRECTORIES true
        "${root}/lib/llvm-*/lib/clang/*/amdgcn/bitcode")
      set(best_major 0)
      foreach(candidate IN LISTS bitcodes)
        # ${CMAKE_MATCH_1} would expand before MATCHES runs: test the match on its own first.
        if(NOT candidate MATCHES "/lib/llvm-([0-9]+)/lib/clang/[^/]+/amdgcn/bitcode$")
          continue()
        endif()
        set(major "${CMAKE_MATCH_1}")
        if(major GREATER best_major AND EXISTS "${root}/lib/llvm-${major}/bin/clang++")
          set(best_major "${major}")
          set(compiler "${root}/lib/llvm-${major}/bin/clang++")
          set(bitcode "${candidate}")
          set(detail "distribution packages, bitcode in lib/llvm-${major}")
        endif()
      endforeach()
    endif()
    if(compiler)
      set(_b2c_rocm_root "${root}" PARENT_SCOPE)
      set(_b2c_rocm_layout "distribution" PARENT_SCOPE)
      set(_b2c_rocm_layout_detail "${detail}" PARENT_SCOPE)
      set(_b2c_rocm_compiler "${compiler}" PARENT_SCOPE)
      set(_b2c_rocm_libdir "${libdir}" PARENT_SCOPE)
      set(_b2c_rocm_cmakedir "${libdir}/cmake" PARENT_SCOPE)
      set(_b2c_rocm_bitcode "${bitcode}" PARENT_SCOPE)
      set(_b2c_rocm_version "${version}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

unset(_b2c_rocm_root)
_b2c_find_rocm()

# --offload-compress (ROCm >= 6.2) zstd-compresses each translation unit's code objects in the
# library: with several archs per kernel they are most of its size.
set(BUILD2CMAKE_ROCM_OFFLOAD_FLAGS "")
if(_b2c_rocm_root AND _b2c_rocm_version VERSION_GREATER_EQUAL 6.2)
  set(BUILD2CMAKE_ROCM_OFFLOAD_FLAGS --offload-compress)
endif()

# rocThrust: torch's torch/headeronly/util/complex.h (c10/util/complex.h before torch 2.9)
# includes <thrust/complex.h> whenever __HIPCC__ is defined, so every HIP source that includes
# torch's tensor headers needs it. A ROCm release tree ships it; distributions package it apart
# (Debian 13 / Ubuntu 24.04 and later: librocthrust-dev; Debian 12 has none).
set(_b2c_rocm_thrust "")
if(_b2c_rocm_root AND EXISTS "${_b2c_rocm_root}/include/thrust/complex.h")
  set(_b2c_rocm_thrust "${_b2c_rocm_root}/include/thrust/complex.h")
endif()
string(CONCAT BUILD2CMAKE_ROCTHRUST_HINT
  "install rocThrust: apt-get install librocthrust-dev (Debian 13 and later; Debian 12 has no "
  "package for it), or build with a ROCm release tree that has it (AMD's rocthrust-dev; set "
  "ROCM_PATH)")

if(CMAKE_SCRIPT_MODE_FILE)
  # `build2cmake doctor` reads these lines.
  list(JOIN _b2c_rocm_searched ", " _b2c_searched)
  message(NOTICE "searched=${_b2c_searched}")
  if(_b2c_rocm_root)
    foreach(name IN ITEMS root layout layout_detail compiler libdir cmakedir bitcode version
                          thrust)
      message(NOTICE "${name}=${_b2c_rocm_${name}}")
    endforeach()
    message(NOTICE "offload_flags=${BUILD2CMAKE_ROCM_OFFLOAD_FLAGS}")
    message(NOTICE "thrust_hint=${BUILD2CMAKE_ROCTHRUST_HINT}")
  endif()
  return()
endif()

if(NOT _b2c_rocm_root)
  list(JOIN _b2c_rocm_searched ", " _b2c_searched)
  message(FATAL_ERROR
    "build2cmake: no ROCm installation with a HIP compiler found (searched: ${_b2c_searched}).\n"
    "Install ROCm (on Debian/Ubuntu: apt-get install hipcc libamdhip64-dev rocm-device-libs "
    "libamd-comgr-dev libhsa-runtime-dev), or point to one with ROCM_PATH=/path/to/rocm or "
    "-C cmake.define.BUILD2CMAKE_ROCM_PATH=/path/to/rocm.")
endif()
message(STATUS "build2cmake: ROCm ${_b2c_rocm_version} at ${_b2c_rocm_root} "
               "(${_b2c_rocm_layout_detail}), HIP compiler ${_b2c_rocm_compiler}")
