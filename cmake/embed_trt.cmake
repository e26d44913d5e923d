# Embeds the tile runtime headers (include/tessera/trt/*.h) into the library, so JIT and AOT
# compiles need no source tree: they are written into the cache directory on first use.
file(GLOB TRT_HEADERS ${PROJECT_SOURCE_DIR}/include/tessera/trt/*.h)
list(SORT TRT_HEADERS)
set(TRT_EMBED_ENTRIES "")
foreach(h ${TRT_HEADERS})
  file(READ ${h} content)
  get_filename_component(fname ${h} NAME)
  string(APPEND TRT_EMBED_ENTRIES "    {\"tessera/trt/${fname}\", R\"TRT_EMBED(${content})TRT_EMBED\"},\n")
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${h})
endforeach()
list(LENGTH TRT_HEADERS TRT_NUM_HEADERS)
configure_file(${PROJECT_SOURCE_DIR}/cmake/trt_headers.cpp.in ${PROJECT_BINARY_DIR}/generated/trt_headers.cpp @ONLY)
