# tests/monitor/fake_nvml.cmake: two stand-in NVML libraries for the monitor's tests (see
# fake_nvml.c): a recent driver and an old one. Each is named libnvidia-ml.so.1 in its own folder,
# as the real one is; the tests find them through CUTTLE_BINARY_DIR and load them through
# CUTTLE_NVML_LIBRARY. Included at the end of tests/CMakeLists.txt.
foreach(flavor full old)
  add_library(fake_nvml_${flavor} SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_nvml.c)
  set_target_properties(fake_nvml_${flavor} PROPERTIES
    OUTPUT_NAME nvidia-ml NO_SONAME ON SUFFIX ".so.1"
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/monitor/fake_nvml_${flavor})
  if(flavor STREQUAL "old")
    target_compile_definitions(fake_nvml_old PRIVATE FAKE_OLD_DRIVER)
  endif()
endforeach()
# The tests dlopen the libraries, so nothing links them: make the test build them first.
if(TARGET test_monitor_nvml)
  add_dependencies(test_monitor_nvml fake_nvml_full fake_nvml_old)
endif()
# The monitor's tests parse `--json` output with cJSON (Debian: libcjson-dev, in scripts/deps.sh).
find_library(CUTTLE_CJSON_LIB cjson)
find_path(CUTTLE_CJSON_INCLUDE cJSON.h PATH_SUFFIXES cjson)
if(NOT CUTTLE_CJSON_LIB OR NOT CUTTLE_CJSON_INCLUDE)
  message(FATAL_ERROR "cJSON not found: apt-get install libcjson-dev (scripts/deps.sh does it)")
endif()
if(TARGET test_monitor_nvml)
  target_include_directories(test_monitor_nvml PRIVATE ${CUTTLE_CJSON_INCLUDE})
  target_link_libraries(test_monitor_nvml PRIVATE ${CUTTLE_CJSON_LIB})
endif()
