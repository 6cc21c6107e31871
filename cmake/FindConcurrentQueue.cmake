# moodycamel ConcurrentQueue is header-only and Debian's libconcurrentqueue-dev ships no CMake
# config, so find its headers here and present them as ConcurrentQueue::ConcurrentQueue.
find_path(ConcurrentQueue_INCLUDE_DIR
  NAMES blockingconcurrentqueue.h
  PATH_SUFFIXES concurrentqueue concurrentqueue/moodycamel)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ConcurrentQueue REQUIRED_VARS ConcurrentQueue_INCLUDE_DIR)
if(ConcurrentQueue_FOUND AND NOT TARGET ConcurrentQueue::ConcurrentQueue)
  add_library(ConcurrentQueue::ConcurrentQueue INTERFACE IMPORTED)
  set_target_properties(ConcurrentQueue::ConcurrentQueue PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES ${ConcurrentQueue_INCLUDE_DIR})
endif()
mark_as_advanced(ConcurrentQueue_INCLUDE_DIR)
