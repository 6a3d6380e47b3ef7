# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=name -P embed_binary.cmake
# Writes a C++ source defining
#   extern "C" const unsigned char <SYMBOL>[];   // the bytes of INPUT
#   extern "C" const size_t <SYMBOL>_size;
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Break the initializer into lines of 32 bytes so compilers and editors cope.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}"
  "// Generated from ${INPUT} by cmake/embed_binary.cmake; do not edit.\n"
  "#include <cstddef>\n"
  "extern \"C\" const unsigned char ${SYMBOL}[] = {\n${bytes}\n};\n"
  "extern \"C\" const size_t ${SYMBOL}_size = ${size};\n")
