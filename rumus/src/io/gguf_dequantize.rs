//! Decoding of the ggml encodings rumus reads but has no products for: the k-quants of the
//! `Q4_K_M`, `Q5_K_M` and `Q6_K` files most language models ship as (super-blocks of 256
//! values, each split into sub-blocks that carry their own scale and minimum as small
//! integers relative to the super-block's f16 scales), and the 5-bit `q5_0` and `q5_1` blocks
//! those files use for matrices whose rows are not whole super-blocks. rumus dequantizes them
//! to f32 when it reads them; the layouts are llama.cpp's (`block_q5_0`, `block_q5_1`,
//! `block_q4_K`, `block_q5_K`, `block_q6_K` in ggml-common.h).

use half::f16;

use super::gguf_format::GgmlType;
use crate::backend::cpu::block_quant::half_at;
use crate::error::Result;
use crate::nn::block_quantized::BlockFormat;

/// Which of these encodings a tensor's bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    /// Blocks of 32: `d` (f16), 32 fifth bits (a little-endian u32), 16 bytes of low
    /// nibbles: 22 bytes; value = d * (q - 16).
    Q5_0,
    /// As `Q5_0` with a minimum `m` (f16) after `d`: 24 bytes; value = d * q + m.
    Q5_1,
    /// `d`, `dmin` (f16), 12 bytes of eight packed 6-bit scales and minimums, 128 bytes of
    /// 4-bit values: 144 bytes; value = d * scale * q - dmin * min.
    Q4K,
    /// As `Q4K`, with a fifth bit of each value in 32 more bytes: 176 bytes.
    Q5K,
    /// 128 bytes of the values' low 4 bits, 64 of their high 2 bits, 16 signed 8-bit scales,
    /// `d` (f16): 210 bytes; value = d * scale * (q - 32).
    Q6K,
}

impl Encoding {
    /// The encoding a GGML type is, if it is one of these.
    pub(super) fn of(ggml_type: GgmlType) -> Option<Encoding> {
        match ggml_type {
            GgmlType::Q5_0 => Some(Encoding::Q5_0),
            GgmlType::Q5_1 => Some(Encoding::Q5_1),
            GgmlType::Q4K => Some(Encoding::Q4K),
            GgmlType::Q5K => Some(Encoding::Q5K),
            GgmlType::Q6K => Some(Encoding::Q6K),
            _ => None,
        }
    }

    /// Bytes per block (of 32 values) or super-block (of 256), as [`GgmlType::block`] also
    /// says.
    pub(super) fn bytes(self) -> usize {
        match self {
            Encoding::Q5_0 => 22,
            Encoding::Q5_1 => 24,
            Encoding::Q4K => 144,
            Encoding::Q5K => 176,
            Encoding::Q6K => 210,
        }
    }
}

/// The blocks of `raw` (whole ones) appended to `out` as f32.
pub(super) fn dequantize(kind: Encoding, raw: &[u8], out: &mut Vec<f32>) {
    for block in raw.chunks_exact(kind.bytes()) {
        match kind {
            Encoding::Q5_0 => five_bit(block, false, out),
            Encoding::Q5_1 => five_bit(block, true, out),
            Encoding::Q4K => with_scales_and_minimums(block, false, out),
            Encoding::Q5K => with_scales_and_minimums(block, true, out),
            Encoding::Q6K => six_bit(block, out),
        }
    }
}

/// One q5_0 block, or a q5_1 one (`with_minimum`): value `j` (0..16) is the low nibble of
/// byte `j` with fifth bit `j`, value `j + 16` the high nibble with fifth bit `j + 16`.
fn five_bit(block: &[u8], with_minimum: bool, out: &mut Vec<f32>) {
    let d = half_at(block, 0);
    let minimum = with_minimum.then(|| half_at(block, 2));
    let at = if with_minimum { 4 } else { 2 };
    // (As llama.cpp rounds: q5_0 subtracts 16 before its one multiplication.)
    let value = |q: u8| match minimum {
        Some(minimum) => d * f32::from(q) + minimum,
        None => d * (f32::from(q) - 16.0),
    };
    let fifth = u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]]);
    let nibbles = &block[at + 4..at + 20];
    for half in 0..2 {
        out.extend(nibbles.iter().enumerate().map(|(j, &byte)| {
            let bit = ((fifth >> (j + 16 * half)) & 1) as u8;
            value(((byte >> (4 * half)) & 0x0f) | bit << 4)
        }));
    }
}

/// Scale and minimum of sub-block `j` (0..8) from the 12 packed bytes: six bits each, the
/// first four sub-blocks' in the low bits of bytes 0-7, the last four's split between the
/// nibbles of bytes 8-11 and the top two bits of bytes 0-7.
fn scale_and_minimum(packed: &[u8], j: usize) -> (f32, f32) {
    let (scale, minimum) = if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        )
    };
    (f32::from(scale), f32::from(minimum))
}

/// One Q4_K super-block, or a Q5_K one (`five_bit`), whose values' fifth bits sit between
/// the scales and the low nibbles. Both start with `d`, `dmin` and the packed scales.
fn with_scales_and_minimums(block: &[u8], five_bit: bool, out: &mut Vec<f32>) {
    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
    let packed = &block[4..16];
    let (high_bits, low) = if five_bit {
        (Some(&block[16..48]), &block[48..176])
    } else {
        (None, &block[16..144])
    };
    // Four runs of 64 values: 32 low nibbles then 32 high nibbles of the same 32 bytes, each
    // half a sub-block of its own (and bit `2 * run + half` of the fifth bits).
    for (run, nibbles) in low.chunks_exact(32).enumerate() {
        for half in 0..2 {
            let sub_block = 2 * run + half;
            let (scale, minimum) = scale_and_minimum(packed, sub_block);
            let (step, offset) = (d * scale, dmin * minimum);
            out.extend(nibbles.iter().enumerate().map(|(l, &byte)| {
                let mut q = if half == 0 { byte & 0x0f } else { byte >> 4 };
                if let Some(high) = high_bits {
                    q |= ((high[l] >> sub_block) & 1) << 4;
                }
                step * f32::from(q) - offset
            }));
        }
    }
}

/// One Q6_K super-block: two halves of 128 values, each from 64 bytes of low nibbles, 32 of
/// high bit pairs and 8 scales.
fn six_bit(block: &[u8], out: &mut Vec<f32>) {
    let d = half_at(block, 208);
    let scales = &block[192..208];
    for half in 0..2 {
        let low = &block[64 * half..64 * half + 64];
        let high = &block[128 + 32 * half..128 + 32 * half + 32];
        let scales = &scales[8 * half..8 * half + 8];
        // Quarter `k` of the 128 values: low nibbles (k = 0, 1) or high nibbles (k = 2, 3) of
        // bytes 32 * (k % 2).., with bit pair k of `high`; 16 values per scale.
        for k in 0..4 {
            let nibbles = &low[32 * (k % 2)..32 * (k % 2) + 32];
            out.extend((0..32).map(|l| {
                let nibble = if k < 2 {
                    nibbles[l] & 0x0f
                } else {
                    nibbles[l] >> 4
                };
                let q = (nibble | (((high[l] >> (2 * k)) & 3) << 4)) as i32 - 32;
                let scale = f32::from(scales[2 * k + l / 16] as i8);
                d * scale * q as f32
            }));
        }
    }
}

/// Q4_K super-blocks (`raw`, whole ones; `name` is the tensor's, for an allocation error)
/// rewritten as q4_1 blocks, eight per super-block in the same order: a Q4_K sub-block of 32 values is a q4_1 block (scale
/// `d * scale`, minimum `-dmin * minimum`, 4-bit values) whose two f16s round the products,
/// so each value moves by at most 3 * 2^-11 of the sub-block's largest magnitude. The values
/// of sub-block `2r + h` are the low (`h = 0`) or high nibbles of bytes `32r..32r + 32`; a
/// q4_1 block holds value `j` in the low nibble of its byte `j` and value `j + 16` in the
/// high one.
pub(super) fn q4k_as_q4_1(name: &str, raw: &[u8]) -> Result<Vec<u8>> {
    let super_blocks = raw.len() / Encoding::Q4K.bytes();
    let q4_1_bytes = BlockFormat::Q4_1.block_bytes();
    let mut out = crate::alloc::try_with_capacity("gguf", name, super_blocks * 8 * q4_1_bytes)?;
    for block in raw.chunks_exact(Encoding::Q4K.bytes()) {
        let (d, dmin) = (half_at(block, 0), half_at(block, 2));
        let packed = &block[4..16];
        for (run, nibbles) in block[16..144].chunks_exact(32).enumerate() {
            for half in 0..2 {
                let (scale, minimum) = scale_and_minimum(packed, 2 * run + half);
                out.extend(f16::from_f32(d * scale).to_le_bytes());
                out.extend(f16::from_f32(-(dmin * minimum)).to_le_bytes());
                let level = |l: usize| (nibbles[l] >> (4 * half)) & 0x0f;
                out.extend((0..16).map(|j| level(j) | level(j + 16) << 4));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoder walks blocks of the size the file's layout check sized them by.
    #[test]
    fn blocks_have_the_size_the_file_format_gives() {
        for ggml_type in [GgmlType::Q5_0, GgmlType::Q5_1] {
            let kind = Encoding::of(ggml_type).expect("a 5-bit type");
            assert_eq!(ggml_type.block(), Some((32, kind.bytes() as u64)));
        }
        for ggml_type in [GgmlType::Q4K, GgmlType::Q5K, GgmlType::Q6K] {
            let kind = Encoding::of(ggml_type).expect("a k-quant");
            assert_eq!(ggml_type.block(), Some((256, kind.bytes() as u64)));
        }
        assert_eq!(Encoding::of(GgmlType::Q4_0), None);
    }
}
