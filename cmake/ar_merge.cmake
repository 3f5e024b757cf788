# cmake/ar_merge.cmake: run `ar -M` (GNU ar's MRI scripts) on SCRIPT, which merges static archives
# into one (cmake/package.cmake, for the CUDA build's installed libcuttle.a).
#   cmake -DAR=ar -DSCRIPT=merge.mri -P ar_merge.cmake
execute_process(COMMAND ${AR} -M INPUT_FILE ${SCRIPT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ar -M ${SCRIPT} failed (${rc})")
endif()
