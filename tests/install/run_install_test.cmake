# CTest's install test: `cmake --install` the build into a fresh prefix, then build the tiny
# application in tests/install against it twice — through find_package(pagoda) (shared and
# static) and through pkg-config — and run each on MODEL.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DMODEL=... -P run_install_test.cmake
set(work ${BUILD_DIR}/install-test)
file(REMOVE_RECURSE ${work})
set(prefix ${work}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT EXISTS ${MODEL})
  message("SKIP: no model at ${MODEL}")
  return()
endif()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file include/pagoda/engine.h include/pagoda/chat.h)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "${file} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE sonames ${prefix}/lib*/libpagoda.so.*)
file(GLOB_RECURSE archives ${prefix}/lib*/libpagoda.a)
if(NOT sonames OR NOT archives)
  message(FATAL_ERROR "libpagoda.so.* or libpagoda.a missing under ${prefix}")
endif()

# find_package(pagoda)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install -B ${work}/app -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${work}/app)
foreach(app hello_pagoda hello_pagoda_static)
  run(${work}/app/${app} ${MODEL})
  message("${app}: ${last_output}")
endforeach()

# pkg-config, against the shared library
file(GLOB_RECURSE pc_files ${prefix}/*/pagoda.pc)
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(pkg-config --cflags --libs pagoda)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CMAKE_CXX_COMPILER} -std=c++20 ${SOURCE_DIR}/tests/install/hello_pagoda.cpp ${flags} -o ${work}/hello_pkgconfig)
get_filename_component(lib_dir ${pc_dir} DIRECTORY)
set(ENV{LD_LIBRARY_PATH} ${lib_dir})
run(${work}/hello_pkgconfig ${MODEL})
message("hello_pkgconfig: ${last_output}")
