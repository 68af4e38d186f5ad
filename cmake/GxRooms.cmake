# GxRooms.cmake - the one-way rules between the rooms of collectives/.
#
# The layers (common -> topology, gpudirect -> fabric -> collectives ->
# tools) are kept by include directories (CMakeLists.txt). Inside
# collectives/ every header is reached as "collectives/<room>/<file>" from
# the source root, so include directories cannot tell the rooms apart; this
# file reads each room's #include lines instead. It runs at configure time
# (included from collectives/CMakeLists.txt) and as a test in script mode
# (cmake -DGX_ROOMS_ROOT=<tree> -P cmake/GxRooms.cmake), so a wrong-way
# include fails a fresh configure and the suite alike.
#
# A room may include its own headers, the headers listed after MAY, and
# anything outside collectives/. FORBID_CALLS is a regular expression of
# calls the room must not make even through a header it may include.

function(gx_room_rule root room)
  cmake_parse_arguments(R "" "FORBID_CALLS" "MAY" ${ARGN})
  file(GLOB files "${root}/collectives/${room}/*.c" "${root}/collectives/${room}/*.h")
  foreach(f IN LISTS files)
    get_filename_component(name "${f}" NAME)
    file(STRINGS "${f}" incs REGEX "^#include \"collectives/")
    foreach(inc IN LISTS incs)
      string(REGEX REPLACE "^#include \"(collectives/[^\"]+)\".*" "\\1" path "${inc}")
      set(ok FALSE)
      foreach(allowed IN LISTS R_MAY ITEMS "collectives/${room}/")
        string(FIND "${path}" "${allowed}" at)
        if(at EQUAL 0)
          set(ok TRUE)
        endif()
      endforeach()
      if(NOT ok)
        string(REPLACE ";" ", " may "${R_MAY}")
        message(FATAL_ERROR "collectives/${room}/${name} includes ${path}: a file in "
                "collectives/${room}/ may include only its own room's headers and: ${may} "
                "(cmake/GxRooms.cmake says why)")
      endif()
    endforeach()
    if(R_FORBID_CALLS)
      file(STRINGS "${f}" calls REGEX "${R_FORBID_CALLS}")
      if(calls)
        list(GET calls 0 first)
        message(FATAL_ERROR "collectives/${room}/${name} calls what ${room}/ must not "
                "(${R_FORBID_CALLS}): ${first}")
      endif()
    endif()
  endforeach()
endfunction()

function(gx_rooms_check root)
  # Leaves: no other room.
  gx_room_rule("${root}" bootstrap)
  gx_room_rule("${root}" reduce)
  # The schedule: a plan of steps, its builder, chunking, scratch; no
  # transport (the engine keeps the transport state of posted steps).
  gx_room_rule("${root}" schedule MAY collectives/reduce/)
  # comm owns struct gx_comm and builds the transport and the arena from it.
  gx_room_rule("${root}" comm MAY collectives/bootstrap/ collectives/transport/
               collectives/arena/)
  # The transport reads the communicator; it knows no collective.
  gx_room_rule("${root}" transport MAY collectives/comm/ collectives/bootstrap/)
  # Algorithms write schedules with the builder and read the node layout;
  # they never call the transport or reach the engine that runs them.
  gx_room_rule("${root}" algorithms MAY collectives/schedule/
               collectives/comm/comm_internal.h collectives/arena/node_shm.h
               FORBID_CALLS "[^a-z_](xp|gx_xport|coll_progress|coll_issue)[a-z_]*\\(")
  # The arena: a node's shared-memory segment, a resource the arena
  # algorithms (algorithms/arena_*.c) use; it reads the communicator and asks
  # the transport which provider reaches each peer.
  gx_room_rule("${root}" arena MAY collectives/comm/comm_internal.h
               collectives/transport/xport.h)
  # DDP is a client of the collectives: the public API, the narrow
  # communicator view and the f16 helpers.
  gx_room_rule("${root}" ddp MAY collectives/comm/comm_view.h collectives/reduce/half.h)
  # The public entry points and the communicator's set-up and teardown:
  # everything but DDP.
  gx_room_rule("${root}" api MAY collectives/engine/ collectives/schedule/
               collectives/algorithms/ collectives/arena/ collectives/comm/ collectives/reduce/
               collectives/transport/ collectives/bootstrap/)
  # The engine runs schedules: everything below the public entry points.
  gx_room_rule("${root}" engine MAY collectives/schedule/ collectives/algorithms/ collectives/arena/
               collectives/comm/ collectives/reduce/ collectives/transport/
               collectives/bootstrap/)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  if(NOT GX_ROOMS_ROOT)
    message(FATAL_ERROR "usage: cmake -DGX_ROOMS_ROOT=<source tree> -P GxRooms.cmake")
  endif()
  gx_rooms_check("${GX_ROOMS_ROOT}")
  message(STATUS "collectives/ rooms: every include goes the allowed way")
endif()
