# Writes OUT, pagoda-bench's build_info.h: the commit of SOURCE_DIR and the number of commits up
# to it (llama-bench's build_commit and build_number). Run at every build, so the figures never
# name a stale commit; the file is rewritten only when they change, so nothing rebuilds for it.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git rev-list --count HEAD WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE count OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit unknown)
  set(count 0)
endif()
set(content "#pragma once\n#define PAGODA_BUILD_COMMIT \"${commit}\"\n#define PAGODA_BUILD_NUMBER ${count}\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
