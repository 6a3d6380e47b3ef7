# ctest: `cmake -DNM=... -DTAG=x86_64_v3 -DOBJECTS=a.o;b.o -P check_isa_symbols.cmake`
# Fails when an object compiled for an instruction-set level defines an external
# symbol without the level's tag in its name: such a symbol (an inline function or
# template instance) could be merged with the baseline build's and run on a CPU that
# lacks the level (see third_party/metalsim/include/metalsim/isa_variant.h).
if(NOT OBJECTS)
  message(FATAL_ERROR "no objects to check")
endif()
foreach(obj ${OBJECTS})
  execute_process(COMMAND ${NM} --defined-only --extern-only ${obj}
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${obj}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(count 0)
  foreach(line ${lines})
    if(line STREQUAL "")
      continue()
    endif()
    math(EXPR count "${count} + 1")
    if(NOT line MATCHES "${TAG}")
      message(FATAL_ERROR "${obj} defines a symbol shared with the baseline build: ${line}")
    endif()
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "${obj} defines no external symbol (not even its registration entry)")
  endif()
endforeach()
message(STATUS "checked ${OBJECTS}")
