# The GPUs a build is narrowed to, read as torch and kernel-builder read them: TORCH_CUDA_ARCH_LIST
# for CUDA, PYTORCH_ROCM_ARCH for ROCm; and the rules that narrow each kernel's own list to them
# (#59). A plain module: the CUDA and ROCm modules include it, and the tests run its functions
# with cmake -P.

include_guard(GLOBAL)

# The list in `variable`: $<variable> when the environment has it (each configure reads it
# anew), else -D<variable> (a cache entry: it stays with the build folder), else nothing.
# Entries are separated by ';' or spaces, as torch reads them, and each must match `entry` (a
# regular expression; `what` names one); the value is untrusted, so anything else, or a character outside
# `characters` (a regular expression's bracket contents), stops the configure with one message
# saying what was `expected`. Sets ${out} to the list and ${out_origin} to where it came from
# ("" when not set).
function(build2cmake_gpu_target_list out out_origin variable characters entry what expected)
  if(DEFINED ENV{${variable}})
    set(value "$ENV{${variable}}")
    set(origin "${variable} from the environment")
  elseif(DEFINED ${variable})
    set(value "${${variable}}")
    set(origin "${variable} from -D${variable}")
  else()
    set(${out} "" PARENT_SCOPE)
    set(${out_origin} "" PARENT_SCOPE)
    return()
  endif()
  string(LENGTH "${value}" length)
  if(length GREATER 1000 OR value MATCHES "[^${characters}; \t]")
    message(FATAL_ERROR "build2cmake: ${origin} holds characters that none of its entries may "
      "have (or is over 1000 characters long); ${expected}.")
  endif()
  string(REGEX REPLACE "[ \t]+" ";" entries "${value}")
  set(list)
  foreach(item IN LISTS entries)
    if(item STREQUAL "")
      continue()
    endif()
    if(NOT item MATCHES "${entry}")
      message(FATAL_ERROR "build2cmake: ${origin}: '${item}' is not ${what}; ${expected}.")
    endif()
    list(APPEND list "${item}")
  endforeach()
  list(REMOVE_DUPLICATES list)
  set(${out} ${list} PARENT_SCOPE)
  set(${out_origin} "${origin}" PARENT_SCOPE)
endfunction()

# TORCH_CUDA_ARCH_LIST: CUDA capabilities, as cuda-capabilities writes them.
macro(build2cmake_torch_cuda_arch_list out out_origin)
  build2cmake_gpu_target_list(${out} ${out_origin} TORCH_CUDA_ARCH_LIST "0-9a-zA-Z.+"
    "^[0-9]+\\.[0-9][af]?(\\+PTX)?$" "a CUDA capability"
    "expected capabilities such as 8.0, 9.0a, 10.0f or 8.9+PTX, separated by ';' or spaces (torch's names, e.g. Hopper, are not read here: write the numbers)")
endmacro()

# PYTORCH_ROCM_ARCH: AMD GPU processors, each with optional target features.
macro(build2cmake_pytorch_rocm_arch out out_origin)
  build2cmake_gpu_target_list(${out} ${out_origin} PYTORCH_ROCM_ARCH "0-9a-zA-Z:+-"
    "^gfx[0-9a-f]+(:(sramecc|xnack)[+-])*$" "an AMD GPU architecture"
    "expected architectures such as gfx90a, gfx942 or gfx90a:xnack- (target features sramecc and xnack, each + or -), separated by ';' or spaces")
endmacro()

# The capabilities of `capabilities` (a kernel's list) that serve the GPUs of `targets`, the
# loose intersection kernel-builder makes:
# - an arch-specific (9.0a) or family (10.0f) capability is kept when its base (9.0, 10.0) is a
#   target, written with or without a suffix; that target is then served;
# - every other target gets the highest plain capability of the kernel not above it, of its
#   major (SASS runs only on GPUs of its own major), or of any major when the kernel builds PTX
#   for it (8.0+PTX: the driver compiles PTX for later GPUs).
# A target's +PTX is ignored: the kernel's own list says where PTX is built. The result keeps the
# kernel's order.
function(build2cmake_cuda_loose_intersection out capabilities targets)
  set(bases)
  foreach(target IN LISTS targets)
    string(REGEX REPLACE "[af]?(\\+PTX)?$" "" base "${target}")
    list(APPEND bases "${base}")
  endforeach()
  list(REMOVE_DUPLICATES bases)
  set(kept)
  set(unserved ${bases})
  foreach(capability IN LISTS capabilities)
    if(capability MATCHES "^([0-9]+\\.[0-9])[af](\\+PTX)?$" AND CMAKE_MATCH_1 IN_LIST bases)
      list(APPEND kept "${capability}")
      list(REMOVE_ITEM unserved "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  foreach(target IN LISTS unserved)
    string(REGEX MATCH "^[0-9]+" target_major "${target}")
    set(best "")
    set(best_version "")
    foreach(capability IN LISTS capabilities)
      if(NOT capability MATCHES "^(([0-9]+)\\.[0-9])(\\+PTX)?$")
        continue()
      endif()
      set(version "${CMAKE_MATCH_1}")
      if(version VERSION_GREATER target)
        continue()
      endif()
      if(NOT CMAKE_MATCH_2 EQUAL target_major AND NOT CMAKE_MATCH_3)
        continue()
      endif()
      if(best STREQUAL "" OR version VERSION_GREATER best_version)
        set(best "${capability}")
        set(best_version "${version}")
      endif()
    endforeach()
    if(NOT best STREQUAL "")
      list(APPEND kept "${best}")
    endif()
  endforeach()
  set(result)
  foreach(capability IN LISTS capabilities)
    if(capability IN_LIST kept AND NOT capability IN_LIST result)
      list(APPEND result "${capability}")
    endif()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# The archs of `archs` (a kernel's list) that serve `targets`. An arch serves a target of the
# same processor whose target features do not contradict its own (gfx90a:xnack+ cannot run
# where xnack is off); what is compiled carries the features of both, in LLVM's order (sramecc
# before xnack): gfx90a narrowed to gfx90a:xnack- compiles for gfx90a:xnack-, the one
# configuration of that GPU the list asks for. The result keeps the kernel's order.
function(build2cmake_rocm_intersection out archs targets)
  set(result)
  foreach(arch IN LISTS archs)
    string(REPLACE ":" ";" arch_parts "${arch}")
    list(POP_FRONT arch_parts processor)
    foreach(target IN LISTS targets)
      string(REPLACE ":" ";" target_parts "${target}")
      list(POP_FRONT target_parts target_processor)
      if(NOT target_processor STREQUAL processor)
        continue()
      endif()
      set(merged "${processor}")
      set(fits TRUE)
      foreach(feature IN ITEMS sramecc xnack)
        set(mine "")
        set(theirs "")
        foreach(part IN LISTS arch_parts)
          if(part MATCHES "^${feature}([+-])$")
            set(mine "${CMAKE_MATCH_1}")
          endif()
        endforeach()
        foreach(part IN LISTS target_parts)
          if(part MATCHES "^${feature}([+-])$")
            set(theirs "${CMAKE_MATCH_1}")
          endif()
        endforeach()
        if(mine AND theirs AND NOT mine STREQUAL theirs)
          set(fits FALSE)
        elseif(mine OR theirs)
          string(APPEND merged ":${feature}${mine}${theirs}")
          if(mine AND theirs)  # the same sign twice
            string(REGEX REPLACE "([+-])[+-]$" "\\1" merged "${merged}")
          endif()
        endif()
      endforeach()
      if(fits AND NOT merged IN_LIST result)
        list(APPEND result "${merged}")
      endif()
    endforeach()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()
