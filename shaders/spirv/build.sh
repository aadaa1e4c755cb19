#!/bin/sh
# Builds the SPIR-V of the GLSL kernels in shaders/ (today one: matmul_tensor.comp), which
# rumus embeds as they are: CI and users need no shader compiler. Run it after editing a
# .comp file and commit both outputs; a unit test (backend/gpu/coopmat2.rs) fails while the
# recorded hash of the source does not match the source.
#
# Needs glslangValidator 14 or newer (GL_NV_cooperative_matrix2), e.g. Debian 13's
# `glslang-tools`; spirv-val (`spirv-tools`) is used when present. Set GLSLANG (and
# SPIRV_VAL) to run other binaries, e.g. ones unpacked from those packages on an older
# system with their own loader:
#   GLSLANG="/opt/t/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path \
#     /opt/t/usr/lib/x86_64-linux-gnu /opt/t/usr/bin/glslangValidator" shaders/spirv/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
glslang=${GLSLANG:-glslangValidator}
spirv_val=${SPIRV_VAL:-spirv-val}

# build SOURCE OUTPUT [DEFINE...]: shaders/SOURCE.comp into shaders/spirv/OUTPUT.spv, its
# entry point named SOURCE, with the preprocessor definitions given.
build() {
    name=$1
    output=$2
    shift 2
    $glslang -q --target-env vulkan1.3 -S comp -e "$name" --source-entrypoint main "$@" \
        "$here/../$name.comp" -o "$here/$output.spv" >/dev/null
    if command -v "${spirv_val%% *}" >/dev/null 2>&1 || [ -x "${spirv_val%% *}" ]; then
        $spirv_val --target-env vulkan1.3 "$here/$output.spv"
    fi
    echo "built $output.spv ($(wc -c <"$here/$output.spv") bytes)"
}

# record SOURCE: the FNV-1a hash of shaders/SOURCE.comp, which the SPIR-V was built from.
record() {
    python3 - "$here/../$1.comp" >"$here/$1.spv.source-fnv1a" <<'PY'
import sys
h = 0xcbf29ce484222325
for byte in open(sys.argv[1], "rb").read():
    h = ((h ^ byte) * 0x100000001b3) % (1 << 64)
print(f"{h:016x}")
PY
}

for a in 0 1; do
    for b in 0 1; do
        for f in 0 1; do
            build matmul_tensor "matmul_tensor_a${a}_b${b}_f${f}" -DA_ROW_MAJOR=$a -DB_ROW_MAJOR=$b -DF32_OUT=$f
        done
    done
done
record matmul_tensor
