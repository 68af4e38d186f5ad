# GxRooms.cmake - the one-way rules between the rooms of collectives/.
#
# The layers (common -> topology, gpudirect -> fabric -> collectives ->
# tools) are kept by include directories (CMakeLists.txt). Inside
# collectives/ every header is reached as "collectives/<room>/<file>" from
# the source root, so include directories cannot tell the rooms apart; this
# file holds the rules as data and checks them twice:
#
#  - includes (gx_rooms_check): each room's #include lines, at configure
#    time (included from collectives/CMakeLists.txt) and as the test
#    unit.rooms (cmake -DGX_ROOMS_ROOT=<tree> -P cmake/GxRooms.cmake);
#  - calls (gx_rooms_check_calls): what the compiler made of them. nm lists
#    every room's object files; a symbol one room's objects leave undefined
#    and another room's objects define is a call (or a data reference) from
#    the first to the second, however it was declared. The test
#    unit.rooms-calls runs it on the built library
#    (cmake -DGX_ROOMS_OBJECTS=<list file> -DGX_NM=<nm> -P cmake/GxRooms.cmake).
#
# The rooms, from the top down. A room may use only rooms below it, so no
# chain of calls can come back up: the rules themselves are checked for
# that, and the checks above hold the code to the rules.
set(GX_ROOMS ddp api engine algorithms schedule arena transport comm reduce bootstrap)

# A room may include its own headers, the headers or rooms listed after MAY
# (a path ending in "/" is a whole room) and anything outside collectives/.
# It may call into its own room and the rooms MAY names, and also the rooms
# CALLS names (calls through the public API, which it includes as gx/gx.h).
function(gx_rooms_rules)
  # Leaves: no other room.
  gx_room_rule(bootstrap)
  gx_room_rule(reduce)
  # The communicator as a data object: its layout, async error, requests.
  gx_room_rule(comm MAY collectives/bootstrap/)
  # The transport reads the communicator; it knows no collective. The
  # window service applies accumulates with the reduction kernels.
  gx_room_rule(transport MAY collectives/comm/ collectives/bootstrap/ collectives/reduce/)
  # The arena: a node's shared-memory segment, a resource the arena
  # algorithms (algorithms/arena_*.c) use; it reads the communicator and asks
  # the transport which provider reaches each peer.
  gx_room_rule(arena MAY collectives/comm/comm_internal.h collectives/transport/xport.h)
  # The schedule: a plan of steps, its builder, chunking, scratch; no
  # transport (the engine keeps the transport state of posted steps).
  gx_room_rule(schedule MAY collectives/reduce/)
  # Algorithms write schedules with the builder and read the node layout
  # and the arena; they never call the transport or reach the engine that
  # runs them.
  gx_room_rule(algorithms MAY collectives/schedule/ collectives/comm/comm_internal.h
               collectives/arena/node_shm.h)
  # The engine runs schedules: everything below the public entry points.
  gx_room_rule(engine MAY collectives/schedule/ collectives/algorithms/ collectives/arena/
               collectives/comm/ collectives/reduce/ collectives/transport/
               collectives/bootstrap/)
  # The public entry points and the communicator's set-up and teardown:
  # everything but DDP.
  gx_room_rule(api MAY collectives/engine/ collectives/schedule/ collectives/algorithms/
               collectives/arena/ collectives/comm/ collectives/reduce/
               collectives/transport/ collectives/bootstrap/)
  # DDP is a client of the collectives: the public API, the narrow
  # communicator view and the f16 helpers.
  gx_room_rule(ddp MAY collectives/comm/comm_view.h collectives/reduce/half.h CALLS api)
endfunction()

# Record one room's rule (GX_ROOM_<room>_MAY: the includes; _USES: the rooms
# it may call) after checking it names only rooms below this one.
macro(gx_room_rule room)
  cmake_parse_arguments(R "" "" "MAY;CALLS" ${ARGN})
  list(FIND GX_ROOMS ${room} _at)
  if(_at LESS 0)
    message(FATAL_ERROR "cmake/GxRooms.cmake: '${room}' is not in GX_ROOMS")
  endif()
  set(_uses "")
  foreach(_entry IN LISTS R_MAY R_CALLS)
    string(REGEX REPLACE "^collectives/([a-z_]+).*" "\\1" _used "${_entry}")
    list(FIND GX_ROOMS ${_used} _used_at)
    if(_used_at LESS 0 OR NOT _used_at GREATER _at)
      message(FATAL_ERROR "cmake/GxRooms.cmake: ${room}/ may use only rooms below it in "
              "GX_ROOMS (${GX_ROOMS}), not ${_used}/: a room that may use one above it "
              "allows a circle of calls")
    endif()
    list(APPEND _uses ${_used})
  endforeach()
  list(REMOVE_DUPLICATES _uses)
  set(GX_ROOM_${room}_MAY "${R_MAY}" PARENT_SCOPE)
  set(GX_ROOM_${room}_USES "${_uses}" PARENT_SCOPE)
  set(GX_ROOM_${room}_RULED TRUE PARENT_SCOPE)
endmacro()

function(gx_room_includes root room)
  file(GLOB files "${root}/collectives/${room}/*.c" "${root}/collectives/${room}/*.h")
  foreach(f IN LISTS files)
    get_filename_component(name "${f}" NAME)
    file(STRINGS "${f}" incs REGEX "^#include \"collectives/")
    foreach(inc IN LISTS incs)
      string(REGEX REPLACE "^#include \"(collectives/[^\"]+)\".*" "\\1" path "${inc}")
      set(ok FALSE)
      foreach(allowed IN LISTS GX_ROOM_${room}_MAY ITEMS "collectives/${room}/")
        string(FIND "${path}" "${allowed}" at)
        if(at EQUAL 0)
          set(ok TRUE)
        endif()
      endforeach()
      if(NOT ok)
        string(REPLACE ";" ", " may "${GX_ROOM_${room}_MAY}")
        message(FATAL_ERROR "collectives/${room}/${name} includes ${path}: a file in "
                "collectives/${room}/ may include only its own room's headers and: ${may} "
                "(cmake/GxRooms.cmake says why)")
      endif()
    endforeach()
  endforeach()
endfunction()

function(gx_rooms_check root)
  gx_rooms_rules()
  file(GLOB dirs LIST_DIRECTORIES true "${root}/collectives/*")
  foreach(d IN LISTS dirs)
    get_filename_component(room "${d}" NAME)
    if(IS_DIRECTORY "${d}" AND NOT GX_ROOM_${room}_RULED)
      message(FATAL_ERROR "collectives/${room}/ has no rule in cmake/GxRooms.cmake")
    endif()
  endforeach()
  foreach(room IN LISTS GX_ROOMS)
    gx_room_includes("${root}" ${room})
  endforeach()
endfunction()

# `objects_file`: one object file per line, each in a directory named for
# its room (the build's .../gx_collectives.dir/<room>/<file>.c.o).
function(gx_rooms_check_calls objects_file nm)
  gx_rooms_rules()
  file(STRINGS "${objects_file}" objects)
  if(NOT objects)
    message(FATAL_ERROR "rooms: no object files listed in ${objects_file}")
  endif()
  foreach(o IN LISTS objects)
    string(REGEX MATCH "/([a-z_]+)/[^/]+$" _ "${o}")
    set(room "${CMAKE_MATCH_1}")
    if(NOT GX_ROOM_${room}_RULED)
      message(FATAL_ERROR "rooms: ${o} is not in a room's folder")
    endif()
    get_filename_component(name "${o}" NAME)
    string(REGEX REPLACE "\\.o(bj)?$" "" name "${name}")
    set(room_of_${o} ${room})
    set(name_of_${o} "${room}/${name}")
  endforeach()
  execute_process(COMMAND ${nm} -A -g -P ${objects} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "rooms: ${nm} failed (${rc}): ${err}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${out}")
  set(refs "")
  set(ndefs 0)
  foreach(line IN LISTS lines)
    # POSIX format with -A: "<object>: <symbol> <type> [<value> <size>]"
    if(NOT line MATCHES "^(.+): ([^ ]+) ([A-Za-z])( |$)")
      continue()
    endif()
    set(o "${CMAKE_MATCH_1}")
    set(sym "${CMAKE_MATCH_2}")
    set(type "${CMAKE_MATCH_3}")
    if(type STREQUAL "U" OR type STREQUAL "w" OR type STREQUAL "v")
      list(APPEND refs "${o}|${sym}")
    else()
      set(def_${sym} "${o}")
      math(EXPR ndefs "${ndefs} + 1")
    endif()
  endforeach()
  if(ndefs EQUAL 0)
    message(FATAL_ERROR "rooms: nm found no defined symbols in the objects (built with LTO?)")
  endif()
  set(bad "")
  set(nedges 0)
  foreach(ref IN LISTS refs)
    string(REPLACE "|" ";" ref "${ref}")
    list(GET ref 0 o)
    list(GET ref 1 sym)
    if(NOT DEFINED def_${sym})
      continue() # outside collectives/: libc, common/, fabric/, ...
    endif()
    set(from ${room_of_${o}})
    set(to ${room_of_${def_${sym}}})
    if(from STREQUAL to)
      continue()
    endif()
    math(EXPR nedges "${nedges} + 1")
    list(FIND GX_ROOM_${from}_USES ${to} allowed)
    if(allowed LESS 0)
      list(FIND GX_ROOMS ${from} from_at)
      list(FIND GX_ROOMS ${to} to_at)
      set(why "not in its rule")
      if(to_at LESS from_at)
        set(why "a room above it")
      endif()
      list(APPEND bad "collectives/${name_of_${o}} calls ${sym} (collectives/${name_of_${def_${sym}}}): ${from}/ may not call ${to}/, ${why}")
    endif()
  endforeach()
  if(bad)
    list(LENGTH bad n)
    string(REPLACE ";" "\n  " bad "${bad}")
    message(FATAL_ERROR "rooms: ${n} call(s) against the rules of cmake/GxRooms.cmake:\n  ${bad}")
  endif()
  list(LENGTH objects nobj)
  message(STATUS "collectives/ rooms: ${nedges} references between rooms in ${nobj} objects, "
          "every one downward")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  if(GX_ROOMS_OBJECTS)
    if(NOT GX_NM)
      set(GX_NM nm)
    endif()
    gx_rooms_check_calls("${GX_ROOMS_OBJECTS}" "${GX_NM}")
  elseif(GX_ROOMS_ROOT)
    gx_rooms_check("${GX_ROOMS_ROOT}")
    message(STATUS "collectives/ rooms: every include goes the allowed way")
  else()
    message(FATAL_ERROR "usage: cmake -DGX_ROOMS_ROOT=<source tree> -P GxRooms.cmake, or "
            "cmake -DGX_ROOMS_OBJECTS=<file listing objects> [-DGX_NM=nm] -P GxRooms.cmake")
  endif()
endif()
