# Finds a ROCm installation and the HIP compiler that matches its device libraries, with no
# variables from the user. This file is the one place that knows where ROCm lives: the generated
# build includes it, and `build2cmake doctor` runs it as a script (cmake -P), so both always agree.
#
# Roots, first hit wins: -DBUILD2CMAKE_ROCM_PATH (alone when given: a root the user names is
# used or refused, never passed over), $ROCM_PATH, $HIP_PATH, /opt/rocm, AMD's side-by-side
# release trees /opt/rocm-X.Y.Z (newest first; BUILD2CMAKE_ROCM_RELEASES_DIR moves /opt), /usr.
# In each root the layouts below are tried in order:
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
#   _b2c_rocm_version   the HIP version from <root>/include/hip/hip_version.h (e.g. 6.4.43484),
#                       else the X.Y.Z of a release tree named rocm-X.Y.Z
#   BUILD2CMAKE_ROCM_LIBRARIES   the ROCm libraries kernels include (kernel-builder's ROCm build
#                       environment has them all), each with _b2c_rocm_lib_<name>_header (its key
#                       header), _path (where it was found, "" when missing), _install (the
#                       command that installs it for this ROCm) and _incomplete (a header the key
#                       header includes beside itself that is missing; "" when complete); see below
#   BUILD2CMAKE_ROCM_OFFLOAD_FLAGS  extra HIP compile options for device code: --offload-compress
#                       on ROCm >= 6.2 (code objects for several archs shrink several times)
#
# Included by a build, a ROCm that cannot be found is a configure error naming what was searched.
# Run as `cmake -P build2cmake_find_rocm.cmake`, it prints searched=<roots> and, when a ROCm is
# found, the variables above as NAME=VALUE lines (to stderr), and never fails.

include_guard(GLOBAL)
# Run as a script (cmake -P) there is no cmake_minimum_required: without this, CMake 3.x
# would read if(... IN_LIST ...) with its pre-3.3 rules. include() scopes it to this file.
cmake_policy(VERSION 3.26)

set(BUILD2CMAKE_ROCM_PATH "" CACHE PATH "ROCm installation to build with (default: searched)")
set(BUILD2CMAKE_ROCM_RELEASES_DIR "/opt" CACHE PATH
  "Where AMD's side-by-side ROCm release trees rocm-X.Y.Z are looked for")

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
  # A release tree without the header (HIP_PATH's parent, a partial copy) still says its release.
  if(NOT version AND root MATCHES "/rocm-([0-9]+\\.[0-9]+(\\.[0-9]+)?)/*$")
    set(version "${CMAKE_MATCH_1}")
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
  # AMD installs each release as /opt/rocm-X.Y.Z (with /opt/rocm a link to one of them): after
  # /opt/rocm, the newest release first.
  file(GLOB releases LIST_DIRECTORIES true "${BUILD2CMAKE_ROCM_RELEASES_DIR}/rocm-[0-9]*")
  list(FILTER releases INCLUDE REGEX "/rocm-[0-9]+\\.[0-9]+(\\.[0-9]+)?$")
  list(SORT releases COMPARE NATURAL ORDER DESCENDING)
  set(candidates)
  if(BUILD2CMAKE_ROCM_PATH)
    set(candidates "${BUILD2CMAKE_ROCM_PATH}")
  else()
    foreach(root IN ITEMS "$ENV{ROCM_PATH}" "$ENV{HIP_PATH}" /opt/rocm ${releases} /usr)
      if(root AND NOT root IN_LIST candidates)
        list(APPEND candidates "${root}")
      endif()
    endforeach()
  endif()
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

# The ROCm libraries kernels include, as kernel-builder's ROCm build environment carries them
# (hipCUB, hipSPARSELt, rocPRIM, rocThrust, rocSHMEM, rocWMMA) plus hipBLASLt, which kernels
# include too. One row each: name | key header | Debian package | first Debian suite with it |
# AMD's package (its side-by-side form is <package><X.Y.Z>). Checked: Debian 12 has none of them;
# rocSHMEM is in no Debian suite; AMD's /opt/rocm trees ship them all. rocThrust matters beyond the
# kernels that include it: torch's torch/headeronly/util/complex.h (c10/util/complex.h before
# torch 2.9) includes <thrust/complex.h> whenever __HIPCC__ is defined, so every HIP source that
# includes torch's tensor headers needs it.
set(_b2c_rocm_library_table
  "hipBLASLt|hipblaslt/hipblaslt.h|libhipblaslt-dev|sid"
  "hipCUB|hipcub/hipcub.hpp|libhipcub-dev|13"
  "hipSPARSELt|hipsparselt/hipsparselt.h|libhipsparselt-dev|experimental"
  "rocPRIM|rocprim/rocprim.hpp|librocprim-dev|13"
  "rocSHMEM|rocshmem/rocshmem.hpp||"
  "rocThrust|thrust/complex.h|librocthrust-dev|13"
  "rocWMMA|rocwmma/rocwmma.hpp|librocwmma-dev|experimental")

# The folders a HIP compile searches for <lib/header.h> besides its own -I: the ROCm root's
# include folder (/usr/include for distribution packages), then $CPATH and $CPLUS_INCLUDE_PATH,
# which clang reads itself.
function(_b2c_rocm_library_dirs out)
  set(dirs "${_b2c_rocm_root}/include")
  foreach(variable IN ITEMS CPATH CPLUS_INCLUDE_PATH)
    string(REPLACE ":" ";" entries "$ENV{${variable}}")
    foreach(entry IN LISTS entries)
      if(entry AND NOT entry IN_LIST dirs)
        list(APPEND dirs "${entry}")
      endif()
    endforeach()
  endforeach()
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()

# How `name` is installed for the ROCm found: AMD's package for a release tree (the same release),
# Debian's where Debian carries it, else a release tree or headers on CPATH.
function(_b2c_rocm_library_install name debian suite out)
  string(TOLOWER "${name}" amd)
  set(amd "${amd}-dev")
  set(elsewhere "put its headers on CPATH")
  if(_b2c_rocm_layout STREQUAL "rocm")
    set(text "apt-get install ${amd} from AMD's ROCm repository")
    if(_b2c_rocm_root MATCHES "/rocm-([0-9.]+)/*$")
      string(APPEND text " (${amd}${CMAKE_MATCH_1} for ${_b2c_rocm_root})")
    endif()
    string(APPEND text ", or ${elsewhere}")
  elseif(debian)
    if(suite STREQUAL "13")
      set(where "Debian 13 and later; Debian 12 has none")
    else()
      set(where "Debian ${suite} only")
    endif()
    string(CONCAT text "apt-get install ${debian} (${where}), or build with a ROCm release tree "
      "that has it (AMD's ${amd}; set ROCM_PATH), or ${elsewhere}")
  else()
    string(CONCAT text "no Debian package has it: build with a ROCm release tree that has it "
      "(AMD's ${amd}; set ROCM_PATH), or ${elsewhere}")
  endif()
  set(${out} "install ${name}: ${text}" PARENT_SCOPE)
endfunction()

set(BUILD2CMAKE_ROCM_LIBRARIES "")
if(_b2c_rocm_root)
  _b2c_rocm_library_dirs(_b2c_rocm_library_dirs)
  foreach(_b2c_row IN LISTS _b2c_rocm_library_table)
    string(REPLACE "|" ";" _b2c_row "${_b2c_row}")
    list(GET _b2c_row 0 _b2c_name)
    list(GET _b2c_row 1 _b2c_header)
    list(GET _b2c_row 2 _b2c_debian)
    list(GET _b2c_row 3 _b2c_suite)
    list(APPEND BUILD2CMAKE_ROCM_LIBRARIES "${_b2c_name}")
    set(_b2c_rocm_lib_${_b2c_name}_header "${_b2c_header}")
    set(_b2c_rocm_lib_${_b2c_name}_path "")
    set(_b2c_rocm_lib_${_b2c_name}_incomplete "")
    foreach(_b2c_dir IN LISTS _b2c_rocm_library_dirs)
      if(EXISTS "${_b2c_dir}/${_b2c_header}")
        set(_b2c_rocm_lib_${_b2c_name}_path "${_b2c_dir}/${_b2c_header}")
        break()
      endif()
    endforeach()
    # A package may ship the key header without the headers it includes beside it (Debian
    # experimental's librocwmma-dev 7.2.4 lacks rocwmma/internal/): the first one missing.
    if(_b2c_rocm_lib_${_b2c_name}_path)
      file(STRINGS "${_b2c_rocm_lib_${_b2c_name}_path}" _b2c_lines
        REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
      get_filename_component(_b2c_here "${_b2c_rocm_lib_${_b2c_name}_path}" DIRECTORY)
      foreach(_b2c_line IN LISTS _b2c_lines)
        # Matched first, on its own: ${CMAKE_MATCH_1} expands before the if() is evaluated.
        string(REGEX MATCH "\"([^\"]+)\"" _b2c_quoted "${_b2c_line}")
        if(NOT EXISTS "${_b2c_here}/${CMAKE_MATCH_1}")
          set(_b2c_rocm_lib_${_b2c_name}_incomplete "${CMAKE_MATCH_1}")
          break()
        endif()
      endforeach()
    endif()
    _b2c_rocm_library_install("${_b2c_name}" "${_b2c_debian}" "${_b2c_suite}"
      _b2c_rocm_lib_${_b2c_name}_install)
  endforeach()
endif()

# Run as the script itself (not included by another one, such as the backend choice's probe).
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  # `build2cmake doctor` (and `build` after a failed compile) read these lines.
  list(JOIN _b2c_rocm_searched ", " _b2c_searched)
  message(NOTICE "searched=${_b2c_searched}")
  if(_b2c_rocm_root)
    foreach(name IN ITEMS root layout layout_detail compiler libdir cmakedir bitcode version)
      message(NOTICE "${name}=${_b2c_rocm_${name}}")
    endforeach()
    message(NOTICE "offload_flags=${BUILD2CMAKE_ROCM_OFFLOAD_FLAGS}")
    list(JOIN _b2c_rocm_library_dirs ":" _b2c_dirs)
    message(NOTICE "library_dirs=${_b2c_dirs}")
    foreach(name IN LISTS BUILD2CMAKE_ROCM_LIBRARIES)
      # name|key header|where found ("" when missing)|how to install it|the first header the
      # key header includes beside itself that is missing ("" when complete)
      message(NOTICE "library=${name}|${_b2c_rocm_lib_${name}_header}|"
                     "${_b2c_rocm_lib_${name}_path}|${_b2c_rocm_lib_${name}_install}|"
                     "${_b2c_rocm_lib_${name}_incomplete}")
    endforeach()
  endif()
  return()
endif()

# Called by the rocm backend (the backend choice only probes): no ROCm is a configure error
# naming what was searched; else one line saying which ROCm builds.
function(build2cmake_require_rocm)
  if(NOT _b2c_rocm_root)
    list(JOIN _b2c_rocm_searched ", " searched)
    message(FATAL_ERROR
      "build2cmake: no ROCm installation with a HIP compiler found (searched: ${searched}).\n"
      "Install ROCm (on Debian/Ubuntu: apt-get install hipcc libamdhip64-dev rocm-device-libs "
      "libamd-comgr-dev libhsa-runtime-dev), or point to one with ROCM_PATH=/path/to/rocm or "
      "-C cmake.define.BUILD2CMAKE_ROCM_PATH=/path/to/rocm.")
  endif()
  message(STATUS "build2cmake: ROCm ${_b2c_rocm_version} at ${_b2c_rocm_root} "
                 "(${_b2c_rocm_layout_detail}), HIP compiler ${_b2c_rocm_compiler}")
endfunction()
