# test_layers.cmake — the build's include rules (scripts/layers.cmake) hold the
# floors apart: each case is a file of one #include, checked under a floor's
# rule as CMakeLists.txt sets it (ZP_ALLOW_*, handed in by tests/CMakeLists.txt);
# a refused include must fail, naming the file and the include, an allowed one pass.
#
#   cmake -DSOURCE=<repo> -DWORK=<scratch folder> -Dbase=RE -Dimage=RE -Dring=RE -Dapi=RE
#         -Dreport=RE -Dcache=RE -Dlogger=RE -Dsupervisor=RE -P test_layers.cmake
# floor, the included path, and whether the rule lets it in
set(cases
  "base|pipeline/config/config.h|no"
  "base|pipeline/base/log.h|yes"
  "image|pipeline/dataset/dataset.h|no"
  "image|pipeline/config/config.h|yes"
  "image|pipeline/source/source.h|no"
  "ring|pipeline/source/source.h|yes"
  "ring|pipeline/report/report.h|no"
  "ring|pipeline/supervisor/supervisor.h|no"
  "ring|stages/cache/cache.h|no"
  "ring|pipeline/include/zeus_pipe.h|no"
  "ring|pipeline/stage/stage.h|yes"
  "api|pipeline/include/zeus_pipe.h|yes"
  "api|stages/loader/loader.h|yes"
  "api|stages/cache/cache.h|no"
  "report|pipeline/supervisor/supervisor.h|no"
  "report|stages/logger/logger.h|no"
  "report|pipeline/config/config.h|yes"
  "cache|pipeline/report/report.h|no"
  "cache|stages/prefetch/prefetch.h|no"
  "cache|../pipeline/report/report.h|no"
  "logger|pipeline/report/report.h|yes"
  "supervisor|pipeline/cli/cmd.h|no"
  "supervisor|pipeline/report/report.h|yes")
file(MAKE_DIRECTORY "${WORK}")
set(i 0)
foreach(c IN LISTS cases)
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 floor)
  list(GET parts 1 path)
  list(GET parts 2 want)
  math(EXPR i "${i} + 1")
  set(file "${WORK}/case${i}.c")
  file(WRITE "${file}" "#include \"${path}\"\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -DLAYER=${floor} "-DALLOW=${${floor}}" "-DFILES=${file}"
                          -DSTAMP=${WORK}/case${i}.ok -P ${SOURCE}/scripts/layers.cmake
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \t\n]+" " " err "${err}") # CMake wraps its messages
  if(want STREQUAL "yes" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "the ${floor} floor refused \"${path}\": ${err}")
  elseif(want STREQUAL "no" AND rc EQUAL 0)
    message(FATAL_ERROR "the ${floor} floor let \"${path}\" in")
  elseif(want STREQUAL "no" AND NOT err MATCHES "case${i}[.]c includes \"${path}\", which the ${floor} layer may not see")
    message(FATAL_ERROR "refused without naming the file and the include: ${err}")
  endif()
endforeach()
message(STATUS "${i} includes checked against the floors")
