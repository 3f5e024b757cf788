# Run one program of examples/ as a test: it must exit with status 0, and what it prints must
# contain every regular expression (CMake syntax, one per line; blank lines and lines starting
# with # are ignored) of the file EXPECT. CTest's PASS_REGULAR_EXPRESSION alone would ignore the
# exit status, hence this script.
#   cmake -DEXE=path/to/example -DEXPECT=tests/examples/NAME.expect -P run_example.cmake
execute_process(COMMAND "${EXE}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} exited with status ${rc}")
endif()
# The file is split by hand, not read as a CMake list: an unbalanced [ in a pattern would join
# list elements.
file(READ "${EXPECT}" rest)
set(checked 0)
while(NOT rest STREQUAL "")
  string(FIND "${rest}" "\n" nl)
  if(nl EQUAL -1)
    set(p "${rest}")
    set(rest "")
  else()
    string(SUBSTRING "${rest}" 0 ${nl} p)
    math(EXPR nl "${nl} + 1")
    string(SUBSTRING "${rest}" ${nl} -1 rest)
  endif()
  if(p STREQUAL "" OR p MATCHES "^#")
    continue()
  endif()
  if(NOT out MATCHES "${p}")
    message(FATAL_ERROR "the output of ${EXE} lacks a match of \"${p}\" (${EXPECT})")
  endif()
  math(EXPR checked "${checked} + 1")
endwhile()
if(checked EQUAL 0)
  message(FATAL_ERROR "${EXPECT} holds no pattern to check")
endif()
message("${checked} patterns of ${EXPECT} found")
