# gx_torch (python/gx_torch) installed next to libgx, Debian style: under
# lib/python3/dist-packages for prefix /usr, lib/python3.N/dist-packages for
# other prefixes (where Debian's python3 looks, e.g. /usr/local). Override
# with -DGX_INSTALL_PYTHONDIR=... (relative to the prefix, or absolute).
# _gx_install.py tells the module where libgx is, relative to itself, so it
# loads without GX_LIBRARY from any prefix.
if(NOT DEFINED GX_INSTALL_PYTHONDIR)
  set(_gx_pydir "lib/python3/dist-packages")
  if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    find_program(GX_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
    if(GX_PYTHON3)
      execute_process(COMMAND ${GX_PYTHON3} -c "import sys; print(f'lib/python3.{sys.version_info[1]}/dist-packages')"
        OUTPUT_VARIABLE _gx_pydir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _gx_pyrc)
      if(NOT _gx_pyrc EQUAL 0)
        set(_gx_pydir "lib/python3/dist-packages")
      endif()
    endif()
  endif()
  set(GX_INSTALL_PYTHONDIR ${_gx_pydir} CACHE STRING "Where gx_torch is installed (relative to the prefix)")
endif()
file(GLOB GX_TORCH_SOURCES ${CMAKE_SOURCE_DIR}/python/gx_torch/*.py)
install(FILES ${GX_TORCH_SOURCES} DESTINATION ${GX_INSTALL_PYTHONDIR}/gx_torch)
# The relative path is computed at install time, so --prefix works too.
install(CODE "
  set(_pkg \"${GX_INSTALL_PYTHONDIR}/gx_torch\")
  set(_lib \"${CMAKE_INSTALL_LIBDIR}\")
  if(NOT IS_ABSOLUTE \"\${_pkg}\")
    set(_pkg \"\${CMAKE_INSTALL_PREFIX}/\${_pkg}\")
  endif()
  if(NOT IS_ABSOLUTE \"\${_lib}\")
    set(_lib \"\${CMAKE_INSTALL_PREFIX}/\${_lib}\")
  endif()
  file(RELATIVE_PATH _rel \"\${_pkg}\" \"\${_lib}\")
  file(WRITE \"\$ENV{DESTDIR}\${_pkg}/_gx_install.py\"
    \"# Written by cmake --install: libgx's directory relative to this package.\\nLIBDIR_FROM_PACKAGE = \\\"\${_rel}\\\"\\n\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${_pkg}/_gx_install.py (libgx in \${_rel})\")
")
