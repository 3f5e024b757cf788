# cmake/package.cmake: cuttle as a library other programs link. Included by the top CMakeLists.txt
# after every target is defined. It makes:
#  - cuttle_shared, libcuttle.so with SONAME libcuttle.so.MAJOR (libuv's scheme: libcuttle.so ->
#    libcuttle.so.0 -> libcuttle.so.0.1.0), which exports the CT_API functions and nothing else;
#  - the install rules (bin/cuttle, the public headers, both libraries, the docs);
#  - cuttle.pc for pkg-config, and the CMake package (find_package(cuttle CONFIG) -> cuttle::cuttle);
#  - the Debian package (cpack -G DEB).

# ---- the shared library ---------------------------------------------------------------------------
# It is the static library linked whole (its objects are already PIC), rather than a second
# compilation of src/**/*.c or an OBJECT library: the objects stay under CMakeFiles/cuttle.dir,
# where scripts/include_graph.sh reads them, and every source compiles once. The backends come in
# with it: cuttle_cuda is a dependency of cuttle, and the OpenCL loader and CLBlast are shared
# libraries it links. A shared library needs a source of its own; this one is empty.
set(_ct_shared_src ${CMAKE_BINARY_DIR}/generated/cuttle_shared.c)
if(NOT EXISTS ${_ct_shared_src})
  file(WRITE ${_ct_shared_src} "/* Generated: libcuttle.so is libcuttle.a linked whole (cmake/package.cmake). */\nextern int ct__shared_empty_unit;\n")
endif()
add_library(cuttle_shared SHARED ${_ct_shared_src})
set_target_properties(cuttle_shared PROPERTIES
  OUTPUT_NAME cuttle EXPORT_NAME cuttle
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  C_VISIBILITY_PRESET hidden
  # The OpenMP build of OpenBLAS lives in its own folder (the top CMakeLists.txt prefers it); the
  # installed library keeps that folder in its RUNPATH so it loads the same BLAS as it was built with.
  INSTALL_RPATH_USE_LINK_PATH ON)
# --whole-archive on link options (which come before the objects on the link line) takes every
# member of libcuttle.a; linking cuttle as usual then brings its dependencies, and lets CMake repeat
# the cuttle/cuttle_cuda pair of the CUDA build. (CMake's $<LINK_LIBRARY:WHOLE_ARCHIVE,cuttle>
# refuses that pair: cuttle would occur both with and without the feature.)
target_link_options(cuttle_shared PRIVATE "LINKER:--whole-archive" "$<TARGET_FILE:cuttle>" "LINKER:--no-whole-archive")
target_link_libraries(cuttle_shared PRIVATE cuttle)
target_link_options(cuttle_shared PRIVATE "LINKER:--version-script=${CMAKE_SOURCE_DIR}/cmake/libcuttle.map")
set_target_properties(cuttle_shared PROPERTIES LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/libcuttle.map)
target_include_directories(cuttle_shared PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(cuttle_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# ---- install ----------------------------------------------------------------------------------------
install(TARGETS cuttle_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS cuttle_shared EXPORT cuttleTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The static library is not in the CMake package (its link interface names imported targets such
# as OpenMP::OpenMP_C and ZLIB::ZLIB); cuttle.pc's Libs.private covers linking it.
if(CUTTLE_WITH_CUDA)
  # With CUDA, libcuttle.a and libcuttle_cuda.a call each other (the registry names the CUDA
  # backend, which reports its errors through the core), so the installed libcuttle.a is the two
  # merged into one archive, which the linker rescans until nothing is missing; the CUDA toolkit's
  # libraries are then in Libs.private.
  set(_ct_merged ${CMAKE_BINARY_DIR}/install-lib/libcuttle.a)
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/install-lib/merge.mri CONTENT
       "create ${_ct_merged}\naddlib $<TARGET_FILE:cuttle>\naddlib $<TARGET_FILE:cuttle_cuda>\nsave\nend\n")
  add_custom_command(OUTPUT ${_ct_merged}
    COMMAND ${CMAKE_COMMAND} -E remove -f ${_ct_merged}
    COMMAND ${CMAKE_COMMAND} -DAR=${CMAKE_AR} -DSCRIPT=${CMAKE_BINARY_DIR}/install-lib/merge.mri
            -P ${CMAKE_SOURCE_DIR}/cmake/ar_merge.cmake
    DEPENDS cuttle cuttle_cuda ${CMAKE_SOURCE_DIR}/cmake/ar_merge.cmake
    COMMENT "Merging libcuttle.a and libcuttle_cuda.a into the installed libcuttle.a")
  add_custom_target(cuttle_static_merged ALL DEPENDS ${_ct_merged})
  install(FILES ${_ct_merged} DESTINATION ${CMAKE_INSTALL_LIBDIR})
else()
  install(TARGETS cuttle ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(FILES ${CMAKE_SOURCE_DIR}/include/cuttle.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/cuttle DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
file(GLOB _ct_docs ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${_ct_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- pkg-config -----------------------------------------------------------------------------------
# Libs.private lists what linking libcuttle.a needs (pkg-config --static); they are all given as
# flags rather than Requires.private, because not every one ships a .pc file and pkg-config fails
# on a missing Requires.private even without --static.
get_filename_component(_ct_blas_dir ${OPENBLAS_LIB} DIRECTORY)
set(CUTTLE_PC_LIBS_PRIVATE "-L${_ct_blas_dir} -lopenblas -lcjson -lz -lprotobuf-c -lpng16 -ljpeg -lpcre2-8 ${OpenMP_C_FLAGS}") # protobuf-c: the summary writer (issue 20); png16, jpeg: the image folder (issue 19); pcre2-8: the BPE tokenizer (issue 33)
if(CUTTLE_WITH_OPENCL)
  string(APPEND CUTTLE_PC_LIBS_PRIVATE " -lOpenCL -lclblast")
endif()
if(CUTTLE_WITH_MPI)
  # Open MPI's C library as FindMPI found it (libmpi.so; its own dependencies come with it).
  foreach(_ct_mpi_lib ${MPI_C_LIBRARIES})
    string(APPEND CUTTLE_PC_LIBS_PRIVATE " ${_ct_mpi_lib}")
  endforeach()
endif()
if(CUTTLE_WITH_CUDA)
  string(APPEND CUTTLE_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcublasLt -lcudnn -lstdc++")
endif()
string(APPEND CUTTLE_PC_LIBS_PRIVATE " -lpthread -lm -ldl")
# The .pc file finds the prefix from its own place (${pcfiledir}), so an installed tree can move:
# `cmake --install build --prefix P` needs no reconfiguration.
file(RELATIVE_PATH _ct_pc_up /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" _ct_pc_up "${_ct_pc_up}")
set(CUTTLE_PC_PREFIX "\${pcfiledir}/${_ct_pc_up}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/cuttle.pc.in ${CMAKE_BINARY_DIR}/cuttle.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cuttle.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- the CMake package ------------------------------------------------------------------------------
include(CMakePackageConfigHelpers)
set(_ct_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/cuttle)
install(EXPORT cuttleTargets NAMESPACE cuttle:: FILE cuttleTargets.cmake DESTINATION ${_ct_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/cuttleConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cuttleConfig.cmake INSTALL_DESTINATION ${_ct_cmake_dir})
# Before 1.0 a minor version may break the API, so only the same MAJOR.MINOR is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cuttleConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cuttleConfig.cmake ${CMAKE_BINARY_DIR}/cuttleConfigVersion.cmake
  DESTINATION ${_ct_cmake_dir})

# ---- the Debian package (cpack -G DEB in the build folder) --------------------------------------
# It installs under /usr what `cmake --install` installs, and depends on the runtime packages of
# Debian 12 that the library and the CLI load: OpenBLAS (the OpenMP build, as linked), cJSON, zlib,
# the OpenMP runtime, and the OpenCL ICD loader and CLBlast where that backend is built. A CUDA
# build also needs the CUDA toolkit's libraries, which come from NVIDIA's repository, not Debian,
# so they are not listed (README.md, "Use cuttle from your program").
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cuttle)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "deep-learning runtime in C: library, headers and the cuttle CLI")
set(CPACK_PACKAGE_DESCRIPTION "cuttle is a deep-learning runtime in C: tensors on the CPU, CUDA or OpenCL devices, autograd, neural-network modules, optimizers, a threaded data loader and safetensors checkpoints. This package holds libcuttle.so and libcuttle.a, the headers, cuttle.pc, the CMake package and the cuttle CLI.")
set(CPACK_PACKAGE_CONTACT "cuttle maintainers <cuttle@localhost>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# A shlibs file and the ldconfig trigger, so dpkg -i makes libcuttle.so.0 loadable at once.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(_ct_deb_depends "libopenblas0-openmp | libopenblas0, libcjson1, zlib1g, libprotobuf-c1, libpng16-16, libjpeg62-turbo, libpcre2-8-0, libgomp1, libc6")
if(CUTTLE_WITH_OPENCL)
  string(APPEND _ct_deb_depends ", ocl-icd-libopencl1, libclblast1")
endif()
if(CUTTLE_WITH_MPI)
  string(APPEND _ct_deb_depends ", libopenmpi3, openmpi-bin")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_ct_deb_depends}")
include(CPack)
