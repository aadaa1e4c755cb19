// Dropout's counter-based draws, appended to elementwise.wgsl and the attention kernels (and
// computed the same way by `backend::cpu::dropout`): element `i` under a 64-bit seed
// (`seed_low`, `seed_high`) draws a uniform number in [0, 1) from the PCG output function
// applied twice, so the mask depends only on the seed and the index, and the backward pass
// draws it again instead of keeping it.

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// `scale` where element `i`'s draw is at or above the drop probability `p`, else 0.
fn kept_times(i: u32, seed_low: u32, seed_high: u32, p: f32, scale: f32) -> f32 {
    let bits = pcg(pcg(i ^ seed_low) + seed_high);
    let uniform = f32(bits >> 8u) / 16777216.0;
    return select(0.0, scale, uniform >= p);
}
