//! Readers of untrusted files allocate what the file's header justifies, not what its
//! compressed contents expand to. A counting allocator measures the peak of each read; the
//! cases run one after another in one test, so no other test's memory mixes in.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;

use rumus::data::{ColorMode, Dataset, IdxReader, ImageFolder, decode_idx, read_image_set};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are only
// statistics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most memory `f` had allocated at once above what was live when it started.
fn peak_extra<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let result = f();
    (result, PEAK.load(Ordering::Relaxed).saturating_sub(before))
}

fn idx_header(dims: &[u32]) -> Vec<u8> {
    let mut bytes = vec![0, 0, 8, dims.len() as u8];
    dims.iter().for_each(|d| bytes.extend(d.to_be_bytes()));
    bytes
}

/// `header` followed by `zeros` zero bytes, gzipped (a few hundred KB for hundreds of MB).
fn gzip_bomb(header: &[u8], zeros: usize) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(header).unwrap();
    let block = vec![0u8; 1 << 20];
    for _ in 0..zeros / block.len() {
        encoder.write_all(&block).unwrap();
    }
    encoder.finish().unwrap()
}

#[test]
fn untrusted_files_cost_what_their_headers_claim() {
    const MIB: usize = 1 << 20;

    // An image file whose header says one 28x28 image, followed by 512 MiB of zeros.
    let bomb = gzip_bomb(&idx_header(&[1, 28, 28]), 512 * MIB);
    assert!(bomb.len() < 4 * MIB, "the bomb is {} bytes", bomb.len());
    let (result, peak) = peak_extra(|| decode_idx(&bomb, Path::new("bomb.idx.gz")));
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("need 784 values but the file holds more"),
        "{message}"
    );
    assert!(
        peak < 4 * MIB,
        "reading the bomb allocated {peak} bytes at its peak"
    );

    // One byte past what a large header claims must not double the reservation on its
    // way to the error.
    let one_over = gzip_bomb(&[idx_header(&[32, 1024, 1024]), vec![0]].concat(), 32 * MIB);
    let (result, peak) = peak_extra(|| decode_idx(&one_over, Path::new("over.idx.gz")));
    let message = result.unwrap_err().to_string();
    assert!(message.contains("holds more"), "{message}");
    assert!(
        peak < 33 * MIB,
        "a 32 MiB file plus one byte allocated {peak} bytes"
    );

    // A header asking for 2^62 values is refused without trying to read them.
    let (result, peak) =
        peak_extra(|| decode_idx(&idx_header(&[1 << 31, 1 << 31]), Path::new("huge.idx")));
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("more memory than can be allocated"),
        "{message}"
    );
    assert!(peak < MIB, "{peak}");

    // Images of zero pixels with a label file that expands to 4 GiB: refused before the
    // labels are read (this aborted allocating 34 GB).
    let dir = std::env::temp_dir().join(format!("rumus-bounded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (images, labels) = (dir.join("images.idx"), dir.join("labels.idx.gz"));
    std::fs::write(&images, idx_header(&[u32::MAX, 0, 0])).unwrap();
    std::fs::write(&labels, gzip_bomb(&idx_header(&[u32::MAX]), 64 * MIB)).unwrap();
    let (result, peak) = peak_extra(|| read_image_set(&images, &labels));
    let message = result.unwrap_err().to_string();
    assert!(message.contains("0 x 0 pixels"), "{message}");
    assert!(peak < MIB, "{peak}");

    // A sound pair still loads, and costs about its size.
    std::fs::write(&images, [idx_header(&[2, 2, 3]), vec![255; 12]].concat()).unwrap();
    std::fs::write(
        &labels,
        gzip_bomb(&[idx_header(&[2]), vec![7, 1]].concat(), 0),
    )
    .unwrap();
    let set = read_image_set(&images, &labels).unwrap();
    assert_eq!((set.len(), set.height, set.width), (2, 2, 3));
    assert_eq!(set.labels, [7, 1]);
    assert!(set.images.iter().all(|&p| p == 1.0));

    // A reader limited to 1 MiB, as a service reading uploads would use: a 75 KB file whose
    // header claims 4 GiB is refused from its header, reserving nothing (without the limit
    // it reserves the 4 GiB and inflates what follows before it can tell).
    let limited = IdxReader::new().max_bytes(MIB);
    let claims_4gib = gzip_bomb(&idx_header(&[4, 1024, 1024, 1024]), 16 * MIB);
    assert!(
        claims_4gib.len() < 128 * 1024,
        "{} bytes",
        claims_4gib.len()
    );
    let (result, peak) = peak_extra(|| limited.decode(&claims_4gib, Path::new("upload.idx.gz")));
    let message = result.unwrap_err().to_string();
    assert_eq!(
        message,
        "upload.idx.gz: the header claims dims [4, 1024, 1024, 1024], 4294967296 bytes of \
         values, more than this reader's limit of 1048576 bytes; if the file is trusted, raise \
         the limit with IdxReader::max_bytes"
    );
    assert!(peak < MIB, "refusing the header allocated {peak} bytes");
    // Exactly the limit reads, one byte more does not; files and image sets alike.
    let at_limit = [idx_header(&[1024, 1024]), vec![9; MIB]].concat();
    let array = limited.decode(&at_limit, Path::new("at.idx")).unwrap();
    assert_eq!(
        (array.dims.as_slice(), array.data.len()),
        (&[1024, 1024][..], MIB)
    );
    assert!(array.data.iter().all(|&v| v == 9));
    let over = [idx_header(&[MIB as u32 + 1]), vec![9; MIB + 1]].concat();
    let message = limited.decode(&over, Path::new("over.idx")).unwrap_err();
    assert!(message.to_string().contains("1048577 bytes"), "{message}");
    let set = limited.read_image_set(&images, &labels).unwrap();
    assert_eq!((set.len(), set.labels.as_slice()), (2, &[7, 1][..]));
    let message = IdxReader::new()
        .max_bytes(11)
        .read_image_set(&images, &labels)
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with(&format!(
            "{}: the header claims dims [2, 2, 3], 12 bytes",
            images.display()
        )),
        "{message}"
    );

    // A PNG whose header announces 60,000 x 60,000 RGBA pixels (14 GB) in an image folder,
    // with the side limit lifted: the decoder's memory limit refuses it from the header.
    let class = dir.join("folder").join("c");
    std::fs::create_dir_all(&class).unwrap();
    std::fs::write(
        class.join("bomb.png"),
        common::png::header_claiming(60_000, 60_000),
    )
    .unwrap();
    let folder = ImageFolder::open(dir.join("folder"), ColorMode::Rgb, 32, 32)
        .unwrap()
        .decode_limits(1 << 20, 256 << 20);
    let (result, peak) = peak_extra(|| folder.get(0));
    let message = result.unwrap_err().to_string();
    assert!(message.contains("exceeds the decode limits"), "{message}");
    assert!(peak < MIB, "decoding the PNG bomb allocated {peak} bytes");
    std::fs::remove_dir_all(dir).ok();
}
