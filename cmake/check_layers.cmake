# Layer check. Each library exports only its own folder (target_include_directories), so a
# quoted include of another layer's header fails to compile unless it climbs out of its folder
# with a relative path. This target fails the build on any such "../" include in the product's
# sources. Run as a script (cmake -P) with HVDS_ROOT set; included from the top level it defines
# the target hvds_check_layers that the base library depends on.
if(CMAKE_SCRIPT_MODE_FILE)
  set(bad "")
  foreach(area runtime ops cuda launcher bench)
    file(GLOB_RECURSE files "${HVDS_ROOT}/${area}/*.c" "${HVDS_ROOT}/${area}/*.h"
         "${HVDS_ROOT}/${area}/*.cc" "${HVDS_ROOT}/${area}/*.cu" "${HVDS_ROOT}/${area}/*.cuh")
    foreach(f IN LISTS files)
      file(STRINGS "${f}" hits REGEX "^[ \t]*#[ \t]*include[ \t]*\"\\.\\./")
      foreach(h IN LISTS hits)
        file(RELATIVE_PATH rel "${HVDS_ROOT}" "${f}")
        string(APPEND bad "  ${rel}: ${h}\n")
      endforeach()
    endforeach()
  endforeach()
  if(bad)
    message(FATAL_ERROR "includes that reach out of their layer (link the library that exports "
                        "the header instead, or move the code to the right layer):\n${bad}")
  endif()
  return()
endif()

add_custom_target(hvds_check_layers ALL
  COMMAND ${CMAKE_COMMAND} -DHVDS_ROOT=${CMAKE_SOURCE_DIR} -P ${CMAKE_CURRENT_LIST_FILE}
  COMMENT "Checking that every include stays within its layer"
  VERBATIM)
