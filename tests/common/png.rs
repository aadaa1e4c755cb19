//! Hand-built PNG files for the image readers' hostile-input tests.

/// One PNG chunk: length, type, data, and the CRC of type and data.
fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend(kind);
    out.extend(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend(crc.finalize().to_be_bytes());
    out
}

/// A PNG whose valid header announces an 8-bit RGBA image of `width` x `height` pixels,
/// followed by a few compressed rows of zeros: what a decompression bomb looks like to a
/// decoder that sizes its buffer from the header.
pub fn header_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend(height.to_be_bytes());
    // Bit depth 8, color type 6 (RGBA), deflate, adaptive filtering, no interlace.
    ihdr.extend([8, 6, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(chunk(b"IHDR", &ihdr));
    let mut zeros = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut zeros, &[0u8; 4096]).unwrap();
    out.extend(chunk(b"IDAT", &zeros.finish().unwrap()));
    out.extend(chunk(b"IEND", &[]));
    out
}
