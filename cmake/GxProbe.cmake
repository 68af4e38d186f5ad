# Probing optional packages without trusting them. A package can be half
# installed (a compiler wrapper without headers, a pkg-config file without its
# library, a header that includes one that is gone): CMake's own finders then
# either report success and fail the build later, or fail the configure hard
# (FindMPI's try_compile on an imported target whose include path is missing).
# gx_try_build compiles and links a small program with plain flags instead, so
# a broken package is one more reason in the configure summary, never an error.
include(CheckCSourceCompiles)

# gx_try_build(<var> <code> [INCLUDES dir...] [LIBRARIES lib...]
#              [COMPILE_OPTIONS opt...] [LINK_OPTIONS opt...])
# Sets <var> to 1 when <code> compiles and links, 0 otherwise; on failure
# GX_TRY_BUILD_ERROR holds the compiler's first error line. Never cached: a
# package installed (or removed) since the last configure is seen.
function(gx_try_build var code)
  cmake_parse_arguments(A "" "" "INCLUDES;LIBRARIES;COMPILE_OPTIONS;LINK_OPTIONS" ${ARGN})
  set(dir ${CMAKE_BINARY_DIR}/CMakeFiles/gx-probe/${var})
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/probe.c "${code}\n")
  set(flags "")
  foreach(inc ${A_INCLUDES})
    list(APPEND flags "-I${inc}")
  endforeach()
  execute_process(
    COMMAND ${CMAKE_C_COMPILER} ${flags} ${A_COMPILE_OPTIONS} probe.c -o probe
            ${A_LINK_OPTIONS} ${A_LIBRARIES}
    WORKING_DIRECTORY ${dir} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    set(${var} 1 PARENT_SCOPE)
    set(GX_TRY_BUILD_ERROR "" PARENT_SCOPE)
  else()
    set(${var} 0 PARENT_SCOPE)
    string(REGEX MATCH "[^\n]*(error|undefined reference|cannot find|No such file)[^\n]*" first "${out}")
    if(NOT first)
      string(REGEX MATCH "[^\n]+" first "${out}")
    endif()
    string(REGEX REPLACE "^.*probe\\.c:[0-9:]* *" "" first "${first}")
    string(REGEX REPLACE "^\\([.a-z]+\\+0x[0-9a-f]+\\): *" "" first "${first}")
    string(REPLACE "\"" "'" first "${first}")
    set(GX_TRY_BUILD_ERROR "${first}" PARENT_SCOPE)
  endif()
endfunction()

# gx_pkg_usable(<prefix> <module> <code>): pkg-config finds <module> and a
# program using it (<code>) builds with exactly the flags it gives. Sets
# <prefix>_USABLE and, when pkg-config found the module but the program did
# not build, <prefix>_BROKEN with the compiler's reason.
function(gx_pkg_usable prefix module code)
  set(${prefix}_USABLE 0 PARENT_SCOPE)
  set(${prefix}_BROKEN "" PARENT_SCOPE)
  if(NOT PKG_CONFIG_FOUND)
    return()
  endif()
  pkg_check_modules(${prefix}_PC QUIET ${module})
  if(NOT ${prefix}_PC_FOUND)
    return()
  endif()
  gx_try_build(ok "${code}" INCLUDES ${${prefix}_PC_INCLUDE_DIRS}
    COMPILE_OPTIONS ${${prefix}_PC_CFLAGS_OTHER} LINK_OPTIONS ${${prefix}_PC_LDFLAGS})
  set(${prefix}_USABLE ${ok} PARENT_SCOPE)
  set(${prefix}_VERSION ${${prefix}_PC_VERSION} PARENT_SCOPE)
  if(NOT ok)
    set(${prefix}_BROKEN "${GX_TRY_BUILD_ERROR}" PARENT_SCOPE)
  endif()
endfunction()
