# cmake/hip.cmake: the AMD (HIP) build. libanyattn_hip is compiled from the same
# sources as libanyattn: the C core and CPU backend with ANYATTN_WITH_HIP, and
# every src/gpu/*.cu as HIP (-x hip) for CDNA matrix cores (gfx90a, gfx942).
# It is a separate library because one process rarely wants both GPU runtimes
# and the two runtimes in one .so are awkward; the CLI and the CUDA tests link
# libanyattn. HIP here is compile-only: no AMD GPU has run this code.
#
# Compilers: a clang >= 17 with HIP support (Debian: clang-19) builds gfx90a and
# gfx942 against the ROCm 5.2 headers, runtime and device libraries of Debian
# (hipcc, libamdhip64-dev, rocm-device-libs); scripts/hip-devlibs.sh adds the
# gfx942 ISA bitcode those libraries lack. Without such a clang, hipcc (clang 15)
# builds gfx90a only. On a full ROCm install set ANYATTN_HIP_COMPILER to its
# hipcc or amdclang++ and ANYATTN_HIP_DEVICE_LIBS to empty.

find_program(ANYATTN_HIP_CLANG NAMES clang++-19 clang++-20 clang++-18 clang++-17)
find_program(ANYATTN_HIPCC NAMES hipcc HINTS /opt/rocm/bin)
find_path(ANYATTN_HIP_INCLUDE hip/hip_runtime.h HINTS /opt/rocm/include)
find_library(ANYATTN_AMDHIP64 amdhip64 HINTS /opt/rocm/lib)
set(_hip_devlibs_src /usr/lib/x86_64-linux-gnu/amdgcn/bitcode)

if((ANYATTN_HIP_CLANG OR ANYATTN_HIPCC) AND ANYATTN_HIP_INCLUDE AND ANYATTN_AMDHIP64)
  set(_hip_default ON)
else()
  set(_hip_default OFF)
endif()
option(ANYATTN_HIP "Build libanyattn_hip, the HIP (AMD) backend (compile-only here)" ${_hip_default})

# Host emulation of the MFMA operand wiring of tile_amd.cuh: plain C, no toolchain needed.
if(ANYATTN_TESTS)
  add_executable(test_hip_layout tests/test_hip_layout.c)
  target_link_libraries(test_hip_layout PRIVATE m)
  target_compile_options(test_hip_layout PRIVATE ${ANYATTN_WARNINGS} -O2)
  add_test(NAME test_hip_layout COMMAND test_hip_layout)
  set_tests_properties(test_hip_layout PROPERTIES LABELS hip TIMEOUT 60)
endif()
if(NOT ANYATTN_HIP)
  return()
endif()
if(NOT ANYATTN_HIP_INCLUDE OR NOT ANYATTN_AMDHIP64 OR NOT (ANYATTN_HIP_CLANG OR ANYATTN_HIPCC))
  message(FATAL_ERROR "ANYATTN_HIP: needs hip/hip_runtime.h, libamdhip64 and clang++-19 or hipcc "
                      "(Debian: scripts/install-deps.sh installs them)")
endif()

# Every tool the HIP build and its disassembly test call, checked here so that a
# missing one stops the configure step with one line naming its Debian package.
# The tools come from the LLVM release of the compiler (/usr/lib/llvm-N/bin).
function(anyattn_hip_require var name dir pkg)
  find_program(${var} NAMES ${name} HINTS ${dir} NO_DEFAULT_PATH)
  if(NOT ${var})
    message(FATAL_ERROR "anyattn HIP build: ${name} not found in ${dir} "
                        "(Debian: apt-get install ${pkg}; or configure with -DANYATTN_HIP=OFF)")
  endif()
endfunction()

if(ANYATTN_HIP_CLANG)
  set(_hip_cc ${ANYATTN_HIP_CLANG})
  set(_hip_archs "gfx90a;gfx942")
  if(EXISTS ${_hip_devlibs_src}/ocml.bc)
    set(_hip_devlibs ${CMAKE_BINARY_DIR}/hip-devlibs)
  else()
    set(_hip_devlibs "")
  endif()
else()
  set(_hip_cc ${ANYATTN_HIPCC})
  set(_hip_archs "gfx90a") # Debian's hipcc (clang 15) rejects gfx942
  set(_hip_devlibs "")
endif()
set(ANYATTN_HIP_COMPILER ${_hip_cc} CACHE FILEPATH "Compiler for src/gpu/*.cu as HIP")

# The compiler's own LLVM folder and release: hipcc's clang is Debian's clang-15.
if(ANYATTN_HIP_CLANG)
  get_filename_component(_hip_llvm_bin ${ANYATTN_HIP_CLANG} REALPATH)
else()
  get_filename_component(_hip_llvm_bin /usr/lib/llvm-15/bin/clang REALPATH)
endif()
get_filename_component(_hip_llvm_bin ${_hip_llvm_bin} DIRECTORY)
string(REGEX MATCH "llvm-([0-9]+)" _m "${_hip_llvm_bin}")
set(_hip_llvm_ver ${CMAKE_MATCH_1})
if(NOT _hip_llvm_ver)
  message(FATAL_ERROR "anyattn HIP build: cannot tell the LLVM release of ${_hip_cc} "
                      "(expected it under /usr/lib/llvm-N/bin); set -DANYATTN_HIP=OFF")
endif()
anyattn_hip_require(ANYATTN_HIP_BUNDLER clang-offload-bundler ${_hip_llvm_bin} clang-tools-${_hip_llvm_ver})
anyattn_hip_require(ANYATTN_HIP_LLD ld.lld ${_hip_llvm_bin} lld-${_hip_llvm_ver})
anyattn_hip_require(ANYATTN_HIP_OBJDUMP llvm-objdump ${_hip_llvm_bin} llvm-${_hip_llvm_ver})
anyattn_hip_require(ANYATTN_HIP_READELF llvm-readelf ${_hip_llvm_bin} llvm-${_hip_llvm_ver})
find_program(ANYATTN_HIP_OBJCOPY objcopy)
if(NOT ANYATTN_HIP_OBJCOPY)
  message(FATAL_ERROR "anyattn HIP build: objcopy not found (Debian: apt-get install binutils)")
endif()
if(_hip_devlibs)
  find_program(ANYATTN_HIP_LLVM_DIS NAMES llvm-dis-15 llvm-dis-${_hip_llvm_ver})
  find_program(ANYATTN_HIP_LLVM_AS NAMES llvm-as-15 llvm-as-${_hip_llvm_ver})
  if(NOT ANYATTN_HIP_LLVM_DIS OR NOT ANYATTN_HIP_LLVM_AS)
    message(FATAL_ERROR "anyattn HIP build: llvm-dis/llvm-as not found for the gfx942 device "
                        "libraries (Debian: apt-get install llvm-15)")
  endif()
endif()
set(ANYATTN_HIP_ARCHS "${_hip_archs}" CACHE STRING "AMD GPU targets (--offload-arch)")
set(ANYATTN_HIP_DEVICE_LIBS "${_hip_devlibs}" CACHE PATH
    "ROCm device-library folder made by scripts/hip-devlibs.sh; empty: the compiler's own")

if(ANYATTN_HIP_DEVICE_LIBS)
  execute_process(COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/hip-devlibs.sh ${ANYATTN_HIP_DEVICE_LIBS}
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "scripts/hip-devlibs.sh failed (${_rc})")
  endif()
endif()

# ---- device code: every src/gpu/*.cu, compiled as HIP -------------------------
set(ANYATTN_HIP_FLAGS -x hip -O3 -std=c++17 -fPIC -fvisibility=hidden -Wall -Wextra
    -DANYATTN_WITH_HIP=1 -DANYATTN_GPU_CONFIGS_AMD=1
    -I${CMAKE_CURRENT_SOURCE_DIR}/include)
foreach(d ${ANYATTN_PRIVATE_INCLUDES})
  list(APPEND ANYATTN_HIP_FLAGS -I${CMAKE_CURRENT_SOURCE_DIR}/${d})
endforeach()
foreach(a ${ANYATTN_HIP_ARCHS})
  list(APPEND ANYATTN_HIP_FLAGS --offload-arch=${a})
endforeach()
if(ANYATTN_HIP_DEVICE_LIBS)
  get_filename_component(_hip_root ${ANYATTN_HIP_INCLUDE} DIRECTORY)
  list(APPEND ANYATTN_HIP_FLAGS --rocm-path=${_hip_root} --rocm-device-lib-path=${ANYATTN_HIP_DEVICE_LIBS})
endif()

file(GLOB _hip_cu CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/gpu/*.cu ${CMAKE_CURRENT_SOURCE_DIR}/src/gpu/inst/*.cu)
file(GLOB_RECURSE _hip_headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cuh ${CMAKE_CURRENT_SOURCE_DIR}/src/*.h)
list(APPEND _hip_headers ${CMAKE_CURRENT_SOURCE_DIR}/include/anyattn.h)
set(ANYATTN_HIP_OBJECTS)
foreach(src ${_hip_cu})
  get_filename_component(n ${src} NAME_WE)
  set(obj ${CMAKE_BINARY_DIR}/hip/${n}.o)
  add_custom_command(OUTPUT ${obj}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/hip
    COMMAND ${ANYATTN_HIP_COMPILER} ${ANYATTN_HIP_FLAGS} -c ${src} -o ${obj}
    DEPENDS ${src} ${_hip_headers}
    COMMENT "HIP ${n}.cu (${ANYATTN_HIP_ARCHS})" VERBATIM)
  list(APPEND ANYATTN_HIP_OBJECTS ${obj})
endforeach()

# ---- host code: the same C sources, built for this library ---------------------
set(_hip_c_sources ${ANYATTN_SOURCES})
list(FILTER _hip_c_sources INCLUDE REGEX "\\.c$")
add_library(anyattn_hip_cobj OBJECT ${_hip_c_sources})
set_target_properties(anyattn_hip_cobj PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
target_include_directories(anyattn_hip_cobj PUBLIC include PRIVATE ${ANYATTN_PRIVATE_INCLUDES})
target_compile_definitions(anyattn_hip_cobj PRIVATE ANYATTN_WITH_HIP=1 ANYATTN_GPU_CONFIGS_AMD=1)
target_compile_options(anyattn_hip_cobj PRIVATE ${ANYATTN_WARNINGS} ${ANYATTN_CPU_FLAGS})
target_link_libraries(anyattn_hip_cobj PUBLIC OpenMP::OpenMP_C m PRIVATE PkgConfig::ANYATTN_CJSON)

set_source_files_properties(${ANYATTN_HIP_OBJECTS} PROPERTIES EXTERNAL_OBJECT ON GENERATED ON)
add_library(anyattn_hip SHARED $<TARGET_OBJECTS:anyattn_hip_cobj> ${ANYATTN_HIP_OBJECTS})
target_include_directories(anyattn_hip PUBLIC include)
target_compile_definitions(anyattn_hip INTERFACE ANYATTN_WITH_HIP=1)
target_link_libraries(anyattn_hip PUBLIC OpenMP::OpenMP_C m ${ANYATTN_AMDHIP64} PRIVATE PkgConfig::ANYATTN_CJSON)
set_target_properties(anyattn_hip PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINKER_LANGUAGE CXX)
message(STATUS "anyattn: HIP backend (libanyattn_hip) with ${ANYATTN_HIP_COMPILER} for ${ANYATTN_HIP_ARCHS}")

# ---- tests: no-device behaviour, and the disassembly of the attention kernels ---
if(ANYATTN_TESTS)
  add_executable(test_hip_nodevice tests/test_hip_nodevice.c)
  target_link_libraries(test_hip_nodevice PRIVATE anyattn_hip m)
  target_compile_options(test_hip_nodevice PRIVATE ${ANYATTN_WARNINGS} -O2)
  set_target_properties(test_hip_nodevice PROPERTIES LINKER_LANGUAGE CXX)
  add_test(NAME test_hip_nodevice COMMAND test_hip_nodevice)
  string(REPLACE ";" "," _hip_archs_csv "${ANYATTN_HIP_ARCHS}")
  add_test(NAME hip_disasm COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/hip_disasm.sh
           ${CMAKE_BINARY_DIR}/hip ${_hip_archs_csv} ${CMAKE_BINARY_DIR}/hip_report.txt)
  set_tests_properties(hip_disasm PROPERTIES ENVIRONMENT
    "HIP_BUNDLER=${ANYATTN_HIP_BUNDLER};HIP_OBJDUMP=${ANYATTN_HIP_OBJDUMP};HIP_READELF=${ANYATTN_HIP_READELF}")
  set_tests_properties(test_hip_nodevice hip_disasm PROPERTIES LABELS hip TIMEOUT 120)
endif()
