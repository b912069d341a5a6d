# layers.cmake — the build's check of who may include whom (CMakeLists.txt
# runs it before each library compiles; a forbidden include fails the build).
#
#   cmake -DLAYER=NAME -DALLOW=REGEX -DFILES=a.c;b.h -DSTAMP=FILE -P layers.cmake
#
# Every `#include "..."` in FILES must match ALLOW (a regular expression for
# the path, from the repository root), and none may climb with "..". System
# headers in <...> are free, except the repository's own folders.
foreach(file IN LISTS FILES)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    set(bad "")
    if(line MATCHES "#[ \t]*include[ \t]*\"([^\"]*)\"")
      set(path "${CMAKE_MATCH_1}")
      if(path MATCHES "\\.\\." OR NOT path MATCHES "${ALLOW}")
        set(bad "${path}")
      endif()
    elseif(line MATCHES "#[ \t]*include[ \t]*<((pipeline|stages|schemas)/[^>]*)>")
      set(bad "${CMAKE_MATCH_1}")
    endif()
    if(bad)
      message(FATAL_ERROR "zeus-pipe layers: ${file} includes \"${bad}\", which the ${LAYER} "
        "layer may not see. Allowed: ${ALLOW}. The floors (each folder's README.md): "
        "schemas/ includes nothing; each runtime floor (pipeline/base, config, net, image, "
        "dataset, source, cachedb, stage, ring, in that order) schemas/, the floors before it and itself; "
        "pipeline/api/ the runtime, pipeline/include/ and stages/loader/; "
        "pipeline/report/ the runtime and itself; a stage the runtime, "
        "schemas/ and its own folder (the logger also the report); pipeline/supervisor/ the "
        "runtime, the report and itself; pipeline/cli/ anything.")
    endif()
  endforeach()
endforeach()
file(WRITE "${STAMP}" "ok\n")
