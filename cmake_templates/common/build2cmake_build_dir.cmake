#
# Refuses a build folder that would lead CMake's writes out of the project. Included before
# project(): the compiler checks that project() runs are the first writes into CMakeFiles/.
#
# A cloned kernel project is untrusted, and CMake, Ninja, the compilers and our build-time
# scripts all follow symlinks. A symlink planted as the build folder (build/cmake), as a folder
# leading to it (build), or anywhere inside it (build/cmake/CMakeFiles, build2cmake-rebuilt,
# hipified) would send their writes elsewhere. `build2cmake generate-torch` and `build` and the
# pyproject's metadata provider refuse the same earlier; this covers a plain `cmake -S -B`.
# What it cannot cover: before this file runs CMake itself has created CMakeFiles/pkgRedirects
# (and read CMakeCache.txt) in the folder it was given.

# `text` with every byte outside printable ASCII written as an escape (\n, \r, \t, \xNN), so a
# planted name or link target can neither forge a line nor send an escape sequence to the
# terminal. build2cmake's own messages (errors.printable) keep printable non-ASCII characters and
# escape only control and format characters; CMake has no Unicode tables, so here every byte
# of a non-ASCII character is escaped (which also covers names that are not UTF-8).
function(build2cmake_printable out text)
  string(REGEX MATCHALL "[^ -~]" bytes "${text}")
  list(REMOVE_DUPLICATES bytes)
  foreach(byte IN LISTS bytes)
    string(HEX "${byte}" hex)
    if(hex STREQUAL "0a")
      set(escape "\\n")
    elseif(hex STREQUAL "0d")
      set(escape "\\r")
    elseif(hex STREQUAL "09")
      set(escape "\\t")
    else()
      set(escape "\\x${hex}")
    endif()
    string(REPLACE "${byte}" "${escape}" text "${text}")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# A symlink inside the build folder is removed (the link, never what it points to) before the
# configure stops, so that what CMake writes as it ends (CMakeCache.txt, CMakeFiles/) goes into
# real folders; the next configure starts clean. A build folder below the project that is, or is
# reached through, a symlink stops the configure with nothing removed.
function(build2cmake_check_build_dir)
  set(reasons "")
  cmake_path(IS_PREFIX CMAKE_SOURCE_DIR "${CMAKE_BINARY_DIR}" NORMALIZE inside)
  if(inside)
    set(folder "${CMAKE_BINARY_DIR}")
    while(NOT folder STREQUAL CMAKE_SOURCE_DIR)
      if(IS_SYMLINK "${folder}")
        file(READ_SYMLINK "${folder}" target)
        build2cmake_printable(folder "${folder}")
        build2cmake_printable(target "${target}")
        build2cmake_printable(binary_dir "${CMAKE_BINARY_DIR}")
        message(FATAL_ERROR
          "build2cmake: ${folder} is a symlink (to ${target}), so the build folder "
          "${binary_dir} lies outside the project. Remove the link; the build folder must "
          "be a real folder inside the project, as CMake and the build write there.")
      endif()
      cmake_path(GET folder PARENT_PATH folder)
    endwhile()
  endif()
  # Only a build folder strictly below the project is ours to clean: in-source (the project's
  # own tree, a venv's links) or a folder the user chose outside, nothing is removed.
  cmake_path(COMPARE "${CMAKE_BINARY_DIR}" EQUAL "${CMAKE_SOURCE_DIR}" in_source)
  if(NOT inside OR in_source)
    return()
  endif()
  # RELATIVE: an entry whose name holds a `;` becomes two list items; that harms only the check
  # of such an entry, and nothing CMake or build2cmake writes has one in its name.
  file(GLOB_RECURSE entries RELATIVE "${CMAKE_BINARY_DIR}" LIST_DIRECTORIES true
    "${CMAKE_BINARY_DIR}/*")
  foreach(entry IN LISTS entries)
    set(path "${CMAKE_BINARY_DIR}/${entry}")
    if(IS_SYMLINK "${path}")
      file(READ_SYMLINK "${path}" target)
      file(REMOVE "${path}")
      build2cmake_printable(path "${path}")
      build2cmake_printable(target "${target}")
      string(APPEND reasons "\n  ${path} (a symlink to ${target})")
    endif()
  endforeach()
  if(reasons)
    build2cmake_printable(binary_dir "${CMAKE_BINARY_DIR}")
    message(FATAL_ERROR
      "build2cmake: the build folder ${binary_dir} held symlinks, through which CMake "
      "and the build would have written outside it; removed them (not what they point to):"
      "${reasons}\nA build folder may hold only real files and folders. Configure again.")
  endif()
endfunction()
build2cmake_check_build_dir()
