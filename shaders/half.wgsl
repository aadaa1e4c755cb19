// Shared by elementwise.wgsl and matmul_coop.wgsl (appended to each when it is compiled):
// f32 to f16 bits with the f16 range handled explicitly.

// The f16 bits of `v`, rounded to nearest; beyond the f16 range (65520 rounds up) an
// infinity of the same sign, where pack2x16float's result would be undefined.
fn half_bits(v: f32) -> u32 {
    if (abs(v) >= 65520.0) {
        return select(0x7c00u, 0xfc00u, v < 0.0);
    }
    return pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu;
}
