# softverbs tests: behaviour cases of sv_test (one ctest test per case) and
# unmodified Debian verbs programs run as two processes over the emulator.
# Every test carries LABELS softverbs; 77 means skipped.

add_executable(sv_test
  ${CMAKE_CURRENT_LIST_DIR}/sv_test_main.c
  ${CMAKE_CURRENT_LIST_DIR}/sv_test_data.c
  ${CMAKE_CURRENT_LIST_DIR}/sv_test_errors.c
  ${CMAKE_CURRENT_LIST_DIR}/sv_test_events.c
  ${CMAKE_CURRENT_LIST_DIR}/sv_test_atomic.c)
target_link_libraries(sv_test PRIVATE softverbs Threads::Threads)

set(SV_ENV_BASE "SOFTVERBS_SEED=12345;SOFTVERBS_STATS=1")

function(sv_case name arg)
  set(env "${SV_ENV_BASE}")
  if(ARGC GREATER 2)
    set(env "${env};${ARGV2}")
  endif()
  add_test(NAME softverbs.${name} COMMAND sv_test ${arg})
  set_tests_properties(softverbs.${name} PROPERTIES LABELS softverbs
    SKIP_RETURN_CODE 77 TIMEOUT 60 ENVIRONMENT "${env}")
endfunction()

foreach(op send send_imm write write_imm read inline)
  foreach(loss 0 10 20)
    sv_case(data_${op}_loss${loss} data_${op} "SOFTVERBS_DROP_PCT=${loss}")
  endforeach()
endforeach()
sv_case(data_mix_dup_reorder mix "SOFTVERBS_DROP_PCT=5;SOFTVERBS_DUP_PCT=5;SOFTVERBS_REORDER_PCT=5")
sv_case(data_mix_delay mix "SOFTVERBS_DELAY_US=200")
sv_case(data_mix_roce_loss10 mix "SOFTVERBS_LINK=roce;SOFTVERBS_DROP_PCT=10")
sv_case(qp_ex qp_ex)
sv_case(qp_ex_roce qp_ex "SOFTVERBS_LINK=roce")
foreach(c bad_rkey bad_lkey dead_peer rnr_exceeded rnr_recover recv_too_small flush qp_misuse
          events srq port_down)
  sv_case(${c} ${c})
endforeach()
sv_case(qp_misuse_roce qp_misuse "SOFTVERBS_LINK=roce")
sv_case(atomic atomic)
sv_case(atomic_loss20 atomic "SOFTVERBS_DROP_PCT=20;SOFTVERBS_DUP_PCT=5")
sv_case(atomic_roce_loss10 atomic "SOFTVERBS_LINK=roce;SOFTVERBS_DROP_PCT=10;SOFTVERBS_REORDER_PCT=5")

# Unmodified programs, two processes each. The TCP port is a hint (run_pair.sh
# picks a free random one) so that ctest -j runs them side by side.
set(SV_RUN ${CMAKE_CURRENT_LIST_DIR}/run_pair.sh)
set(SV_LIB $<TARGET_FILE:softverbs>)
set(SV_PREFIX "")
if(GX_SANITIZE_ADDRESS)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE SV_ASAN_SO OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libubsan.so
    OUTPUT_VARIABLE SV_UBSAN_SO OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(SV_PREFIX "SV_SANITIZER_PRELOAD=${SV_ASAN_SO} ${SV_UBSAN_SO}")
elseif(GX_SANITIZE_THREAD)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libtsan.so
    OUTPUT_VARIABLE SV_TSAN_SO OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(SV_PREFIX "SV_SANITIZER_PRELOAD=${SV_TSAN_SO}")
endif()
set(SV_PINGPONG_RE "iters in [0-9.]+ seconds")
set(SV_BW_RE "^ *65536 +[0-9]+ +[0-9.]+ +[0-9.]+")
set(SV_LAT_RE "^ *2 +[0-9]+ +[0-9.]+ +[0-9.]+")

function(sv_prog name port regex)
  add_test(NAME softverbs.${name} COMMAND ${SV_RUN} ${SV_LIB} ${port} "${regex}" ${ARGN})
  set(env "SOFTVERBS_SEED=1;SOFTVERBS_STATS=1")
  if(SV_PREFIX)
    set(env "${env};${SV_PREFIX}")
  endif()
  if(name MATCHES "roce")
    set(env "${env};SOFTVERBS_LINK=roce")
  endif()
  set_tests_properties(softverbs.${name} PROPERTIES LABELS softverbs
    SKIP_RETURN_CODE 77 TIMEOUT 60 ENVIRONMENT "${env}")
endfunction()

sv_prog(ibv_rc_pingpong 18611 "${SV_PINGPONG_RE}" ibv_rc_pingpong -n 500 -s 8192)
sv_prog(ibv_rc_pingpong_events 18612 "${SV_PINGPONG_RE}" ibv_rc_pingpong -e -n 500 -s 8192)
sv_prog(ibv_rc_pingpong_roce 18613 "${SV_PINGPONG_RE}" ibv_rc_pingpong -g 0 -n 200)
sv_prog(ib_write_bw 18614 "${SV_BW_RE}" ib_write_bw -n 1000)
sv_prog(ib_read_bw 18615 "${SV_BW_RE}" ib_read_bw -n 1000)
sv_prog(ib_send_bw 18616 "${SV_BW_RE}" ib_send_bw -n 1000)
sv_prog(ib_write_lat 18617 "${SV_LAT_RE}" ib_write_lat -n 1000)
sv_prog(ib_write_bw_roce 18618 "${SV_BW_RE}" ib_write_bw -x 0 -n 500)

# Two nodes: network namespaces, routed by GID (IB mode with a GRH, RoCE).
set(SV_NETNS ${CMAKE_CURRENT_LIST_DIR}/run_netns.sh)
function(sv_netns name port regex)
  add_test(NAME softverbs.${name} COMMAND ${SV_NETNS} ${SV_LIB} ${port} "${regex}" ${ARGN})
  set(env "SOFTVERBS_SEED=1")
  if(SV_PREFIX)
    set(env "${env};${SV_PREFIX}")
  endif()
  if(name MATCHES "roce")
    set(env "${env};SOFTVERBS_LINK=roce")
  endif()
  set_tests_properties(softverbs.${name} PROPERTIES LABELS softverbs
    SKIP_RETURN_CODE 77 TIMEOUT 60 ENVIRONMENT "${env}")
endfunction()
sv_netns(netns_rc_pingpong_grh 18621 "${SV_PINGPONG_RE}" ibv_rc_pingpong -g 0 -n 200)
sv_netns(netns_ib_send_bw_roce 18622 "${SV_BW_RE}" ib_send_bw -x 0 -n 500)

# The library as gx's provider loads it (dlopen + dlvsym), and its versions.
add_executable(sv_dlopen_test ${CMAKE_CURRENT_LIST_DIR}/sv_dlopen_test.c)
target_link_libraries(sv_dlopen_test PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME softverbs.dlopen COMMAND sv_dlopen_test ${SV_LIB})
add_test(NAME softverbs.symbol_versions
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_versions.sh ${SV_LIB})
add_test(NAME softverbs.ibv_devinfo
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_devinfo.sh ${SV_LIB})
set_tests_properties(softverbs.dlopen softverbs.symbol_versions softverbs.ibv_devinfo PROPERTIES
  LABELS softverbs SKIP_RETURN_CODE 77 TIMEOUT 30)
if(SV_PREFIX)
  set_property(TEST softverbs.ibv_devinfo PROPERTY ENVIRONMENT "${SV_PREFIX}")
endif()

# rdma-core's own python tests (Debian's python3-pyverbs ships them, v44) over
# softverbs: no crash, no failure, no error, and at least as many passing
# tests as measured (a pass turned into a skip fails too); the rest must skip.
# pyverbs_{ib,roce}: the core modules (about 5 s each); pyverbs_all_*: every
# module (about 20 s each, label long). run_pyverbs.py exits 77 without
# pyverbs. SV_PREFIX preloads the sanitizer runtimes in ASan builds.
set(SV_PYVERBS ${CMAKE_CURRENT_LIST_DIR}/run_pyverbs.py)
set(SV_PYVERBS_CORE test_device test_pd test_cq test_cq_events test_cqex test_mr test_qp
  test_qpex test_shared_pd test_atomic test_addr test_relaxed_ordering)
function(sv_pyverbs name link min_ok labels)
  add_test(NAME softverbs.${name} COMMAND sh -c
    "command -v python3 >/dev/null || { echo 'SKIP: no python3'; exit 77; }; exec python3 \"$@\""
    sh ${SV_PYVERBS} --lib ${SV_LIB} --link ${link} --timeout 120 --max-fail 0 --max-error 0
    --min-ok ${min_ok} ${ARGN})
  set(env "SOFTVERBS_SEED=1")
  if(SV_PREFIX)
    set(env "${env};${SV_PREFIX}")
  endif()
  set_tests_properties(softverbs.${name} PROPERTIES LABELS "${labels}"
    SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "${env}")
endfunction()
sv_pyverbs(pyverbs_ib ib 44 softverbs ${SV_PYVERBS_CORE})
sv_pyverbs(pyverbs_roce roce 44 softverbs ${SV_PYVERBS_CORE})
sv_pyverbs(pyverbs_all_ib ib 45 "softverbs;long")
sv_pyverbs(pyverbs_all_roce roce 45 "softverbs;long")
