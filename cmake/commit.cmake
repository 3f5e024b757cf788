# cmake -DSRC=<source dir> -DOUT=<header> -P commit.cmake: write the source tree's git commit (with
# "-dirty" when it has uncommitted changes) as CT_CLI_COMMIT into OUT, for `cuttle --version`.
# Run at every build; OUT is rewritten only when the commit changed, so nothing rebuilds otherwise.
# A tree without git (a GPU kit's copy) says "unknown".
set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SRC}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SRC}" describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0 AND out)
    set(commit "${out}")
  endif()
endif()
set(text "#define CT_CLI_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
