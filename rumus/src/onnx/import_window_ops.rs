//! Imported ONNX window ops: `Conv`, `ConvTranspose`, `MaxPool`, `AveragePool`, on
//! `[N, C, H, W]` inputs and on `[N, C, L]` ones (Conv1d/MaxPool1d exports, Whisper's
//! encoder), which run as 2-D windows over a unit height and are squeezed back. Pools take
//! `ceil_mode` (squeezenet) and unequal padding by padding the input explicitly.

use super::import_ops::{Attributes, arg, invalid};
use super::limits::{self, Limits};
use crate::error::Result;
use crate::tensor::DynTensor;

/// The spatial axes (1 or 2) of an input of `op` of `rank`.
fn spatial_axes(op: &str, rank: usize) -> Result<usize> {
    match rank {
        3 if op != "ConvTranspose" => Ok(1),
        4 => Ok(2),
        _ => Err(invalid(format!(
            "{op} of a rank-{rank} input: rumus imports {}",
            if op == "ConvTranspose" {
                "2-D ([N, C, H, W]) transposed convolutions"
            } else {
                "1-D ([N, C, L]) and 2-D ([N, C, H, W]) windows"
            }
        ))),
    }
}

/// Checks what loading knows of a node of these ops: the rank of its input, when that is
/// an initializer or a graph input, and every attribute that rank lets it read.
pub(super) fn check(op: &str, a: &Attributes<'_>, ranks: &[Option<usize>]) -> Result<()> {
    let Some(rank) = ranks.first().copied().flatten() else {
        return Ok(());
    };
    let axes = spatial_axes(op, rank)?;
    match op {
        "MaxPool" | "AveragePool" => PoolAttributes::read(op, a, axes).map(drop),
        _ => {
            if let Some(weight) = ranks.get(1).copied().flatten() {
                same_rank(op, rank, weight)?;
            }
            // The kernel comes with the weight at run time; the rest is read now.
            Window::read(a, axes, Some(&[1, 1][..axes])).map(drop)
        }
    }
}

fn same_rank(op: &str, input: usize, weight: usize) -> Result<()> {
    if input == weight {
        return Ok(());
    }
    Err(invalid(format!(
        "{op} of a rank-{input} input by a rank-{weight} weight: the ranks must be equal"
    )))
}

/// A pool's attributes.
struct PoolAttributes {
    window: Window,
    ceil: bool,
    count_pad: bool,
}

impl PoolAttributes {
    fn read(op: &str, a: &Attributes<'_>, axes: usize) -> Result<PoolAttributes> {
        if op == "MaxPool" && a.0.outputs.get(1).is_some_and(|name| !name.is_empty()) {
            return Err(invalid("MaxPool's Indices output is not supported"));
        }
        let ceil = match a.checked_int("ceil_mode", 0)? {
            0 => false,
            1 => true,
            other => {
                return Err(invalid(format!(
                    "attribute ceil_mode = {other}: expected 0 or 1"
                )));
            }
        };
        let count_pad = a.checked_int("count_include_pad", 0)? != 0;
        let window = Window::read(a, axes, None)?;
        if window.dilation != (1, 1) {
            return Err(invalid(format!(
                "attribute dilations: dilated {op} is not supported"
            )));
        }
        Ok(PoolAttributes {
            window,
            ceil,
            count_pad,
        })
    }
}

/// A window's geometry, as 2-D: a 1-D window has height 1 and no padding on that axis.
struct Window {
    kernel: (usize, usize),
    stride: (usize, usize),
    /// `(begin, end)` padding of each axis.
    pads: [(usize, usize); 2],
    dilation: (usize, usize),
}

impl Window {
    /// Reads the attributes of a window over `axes` spatial axes; `kernel` is the weight's
    /// when the op has one, else `kernel_shape`.
    fn read(a: &Attributes<'_>, axes: usize, kernel: Option<&[usize]>) -> Result<Window> {
        if a.0.attributes.iter().any(|(n, v)| {
            n == "auto_pad"
                && !matches!(v, super::decode::AttributeValue::String(s) if s == b"NOTSET")
        }) {
            return Err(invalid(
                "attribute auto_pad is not supported; export with explicit pads",
            ));
        }
        let positive = |name: &str, given: Option<Vec<i64>>| -> Result<Vec<usize>> {
            match given {
                None => Ok(vec![1; axes]),
                Some(v) if v.len() == axes && v.iter().all(|&x| x > 0) => {
                    Ok(v.iter().map(|&x| x as usize).collect())
                }
                Some(v) => Err(invalid(format!(
                    "attribute {name} {v:?}: expected {axes} positive values"
                ))),
            }
        };
        let kernel = match kernel {
            Some(k) => k.to_vec(),
            None => match a.ints("kernel_shape") {
                Some(k) => positive("kernel_shape", Some(k))?,
                None => return Err(invalid("attribute kernel_shape is required")),
            },
        };
        let stride = positive("strides", a.ints("strides"))?;
        let dilation = positive("dilations", a.ints("dilations"))?;
        let pads = match a.ints("pads") {
            None => vec![0; 2 * axes],
            Some(p) if p.len() == 2 * axes && p.iter().all(|&x| x >= 0) => {
                p.iter().map(|&x| x as usize).collect()
            }
            Some(p) => {
                return Err(invalid(format!(
                    "attribute pads {p:?}: expected {} values of at least 0",
                    2 * axes
                )));
            }
        };
        let as_2d = |v: &[usize]| if axes == 1 { (1, v[0]) } else { (v[0], v[1]) };
        Ok(Window {
            kernel: as_2d(&kernel),
            stride: as_2d(&stride),
            pads: if axes == 1 {
                [(0, 0), (pads[0], pads[1])]
            } else {
                [(pads[0], pads[2]), (pads[1], pads[3])]
            },
            dilation: as_2d(&dilation),
        })
    }

    /// The padding of each axis when both sides are equal (what rumus's kernels take).
    fn symmetric(&self) -> Option<(usize, usize)> {
        let [(t, b), (l, r)] = self.pads;
        (t == b && l == r).then_some((t, l))
    }

    /// Output length along axis `k` of an input of `size` (0 where the window never fits),
    /// with PyTorch's `ceil_mode` rule: a last, partial window counts only when it starts
    /// inside the input or its begin padding.
    fn outputs(&self, k: usize, size: usize, ceil: bool) -> usize {
        let [kernel, stride, dilation] = match k {
            0 => [self.kernel.0, self.stride.0, self.dilation.0],
            _ => [self.kernel.1, self.stride.1, self.dilation.1],
        };
        let (begin, end) = self.pads[k];
        // Saturating: a file may give any sizes; the work limit refuses what they imply.
        let padded = size.saturating_add(begin).saturating_add(end);
        let span = kernel
            .saturating_sub(1)
            .saturating_mul(dilation)
            .saturating_add(1);
        let Some(room) = padded.checked_sub(span) else {
            return 0;
        };
        let mut count = room / stride + 1;
        if ceil && room % stride != 0 {
            count += 1;
            if (count - 1).saturating_mul(stride) >= size.saturating_add(begin) {
                count -= 1;
            }
        }
        count
    }
}

/// A rank-3 `[N, C, L]` tensor as `[N, C, 1, L]`; a rank-4 one as it is.
fn as_2d(x: &DynTensor, axes: usize) -> Result<DynTensor> {
    if axes == 1 {
        x.unsqueeze(2)
    } else {
        Ok(x.clone())
    }
}

/// A 2-D result back to 1-D when the input was.
fn from_2d(out: DynTensor, axes: usize) -> Result<Vec<DynTensor>> {
    Ok(vec![if axes == 1 { out.squeeze(2)? } else { out }])
}

fn check_work(limits: &Limits, op: &str, multiply_adds: u64) -> Result<()> {
    limits.check_work(op, multiply_adds).map_err(invalid)
}

pub(super) fn conv(
    a: &Attributes<'_>,
    args: &[Option<&DynTensor>],
    limits: &Limits,
) -> Result<Vec<DynTensor>> {
    let (x, w) = (arg(args, 0)?, arg(args, 1)?);
    let axes = spatial_axes("Conv", x.rank())?;
    same_rank("Conv", x.rank(), w.rank())?;
    let groups = usize::try_from(a.checked_int("group", 1)?)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| invalid("attribute group: expected a positive count"))?;
    let window = Window::read(a, axes, Some(&w.dims()[2..]))?;
    let padding = window.symmetric().ok_or_else(|| {
        invalid("attribute pads: rumus pads both sides of each axis of a Conv equally")
    })?;
    let (x, w) = (as_2d(x, axes)?, as_2d(w, axes)?);
    let d = x.dims();
    let (rows, cols) = (
        window.outputs(0, d[2], false),
        window.outputs(1, d[3], false),
    );
    let wd = w.dims();
    check_work(
        limits,
        "Conv",
        limits::product(&[d[0], wd[0], rows, cols, wd[1], wd[2], wd[3]]),
    )?;
    let out = x.conv2d(
        &w,
        args.get(2).copied().flatten(),
        window.stride,
        padding,
        window.dilation,
        groups,
    )?;
    from_2d(out, axes)
}

pub(super) fn conv_transpose(
    a: &Attributes<'_>,
    args: &[Option<&DynTensor>],
    limits: &Limits,
) -> Result<Vec<DynTensor>> {
    let (x, w) = (arg(args, 0)?, arg(args, 1)?);
    spatial_axes("ConvTranspose", x.rank())?;
    if a.checked_int("group", 1)? != 1 || a.get("output_shape").is_some() {
        return Err(invalid(
            "ConvTranspose: rumus imports 2-D, one group, without output_shape",
        ));
    }
    let output_padding = match a.ints("output_padding").as_deref() {
        None => (0, 0),
        Some(&[h, w]) if h >= 0 && w >= 0 => (h as usize, w as usize),
        Some(v) => return Err(invalid(format!("attribute output_padding {v:?}"))),
    };
    let window = Window::read(a, 2, w.dims().get(2..4))?;
    let padding = window.symmetric().ok_or_else(|| {
        invalid("attribute pads: rumus pads both sides of each axis of a ConvTranspose equally")
    })?;
    // Every input element is spread over out_channels x kh x kw outputs.
    let spread = w.dims().get(1..).map_or(0, limits::product);
    let work = (x.numel() as u64).saturating_mul(spread);
    check_work(limits, "ConvTranspose", work)?;
    Ok(vec![x.conv_transpose2d(
        w,
        args.get(2).copied().flatten(),
        window.stride,
        padding,
        output_padding,
        window.dilation,
    )?])
}

/// `MaxPool` or `AveragePool`.
pub(super) fn pool(
    op: &str,
    a: &Attributes<'_>,
    x: &DynTensor,
    limits: &Limits,
) -> Result<Vec<DynTensor>> {
    let max = op == "MaxPool";
    let axes = spatial_axes(op, x.rank())?;
    let PoolAttributes {
        window,
        ceil,
        count_pad,
    } = PoolAttributes::read(op, a, axes)?;
    let x = as_2d(x, axes)?;
    let d = x.dims();
    let (rows, cols) = (window.outputs(0, d[2], ceil), window.outputs(1, d[3], ceil));
    let per_output = window.kernel.0.saturating_mul(window.kernel.1);
    check_work(
        limits,
        op,
        limits::product(&[d[0], d[1], rows, cols, per_output]),
    )?;
    if rows == 0 || cols == 0 {
        return Err(invalid(format!(
            "{op} of {:?}: the window {:?} is larger than the padded input",
            d, window.kernel
        )));
    }
    let (kernel, stride) = (window.kernel, window.stride);
    let out = match window.symmetric() {
        Some(padding) if !ceil => {
            if max {
                x.max_pool2d(kernel, stride, padding)?
            } else {
                x.avg_pool2d(kernel, stride, padding, count_pad)?
            }
        }
        _ => padded_pool(&x, &window, (rows, cols), max, count_pad)?,
    };
    from_2d(out, axes)
}

/// Pooling of `x` padded explicitly to exactly the `(rows, cols)` windows: by `pads`, then
/// at the end of each axis as far as `ceil_mode`'s last windows reach. Max pools pad with
/// -inf. Average pools sum over zeros and divide by each window's count of the cells that
/// count: the input and its `pads` with `count_include_pad`, the input alone without; never
/// the cells `ceil_mode` adds (PyTorch's rule).
fn padded_pool(
    x: &DynTensor,
    window: &Window,
    (rows, cols): (usize, usize),
    max: bool,
    count_pad: bool,
) -> Result<DynTensor> {
    let d = x.dims();
    let kernel = [window.kernel.0, window.kernel.1];
    let stride = [window.stride.0, window.stride.1];
    let counts = [rows, cols];
    // (begin, end) padding of axes 2 and 3, the end reaching the last window.
    let extents: Vec<(usize, usize)> = (0..2)
        .map(|k| {
            let (begin, end) = window.pads[k];
            let reach = (counts[k] - 1)
                .saturating_mul(stride[k])
                .saturating_add(kernel[k]);
            let short = reach.saturating_sub(d[2 + k].saturating_add(begin));
            (begin, end.max(short))
        })
        .collect();
    let fill = if max { f64::NEG_INFINITY } else { 0.0 };
    let mut padded = x.clone();
    for (k, &(begin, end)) in extents.iter().enumerate() {
        padded = pad_axis(&padded, 2 + k, begin, end, fill)?;
    }
    let (kernel, stride) = (window.kernel, window.stride);
    if max {
        return padded.max_pool2d(kernel, stride, (0, 0));
    }
    let area = kernel.0.saturating_mul(kernel.1) as f64;
    let sums = padded
        .avg_pool2d(kernel, stride, (0, 0), true)?
        .mul_scalar(area)?;
    // 1 on the cells that count, as a [1, 1, H, W] mask pooled the same way: the declared
    // pads of both axes first, so that the cells ceil_mode adds stay 0 on every row.
    let counted = if count_pad { 1.0 } else { 0.0 };
    let mut mask = DynTensor::ones(&[1, 1, d[2], d[3]], x.dtype())?;
    for (k, &(begin, end)) in window.pads.iter().enumerate() {
        mask = pad_axis(&mask, 2 + k, begin, end, counted)?;
    }
    for (k, &(_, end)) in extents.iter().enumerate() {
        mask = pad_axis(&mask, 2 + k, 0, end - window.pads[k].1, 0.0)?;
    }
    let cells = mask
        .avg_pool2d(kernel, stride, (0, 0), true)?
        .mul_scalar(area)?;
    sums.div(&cells)
}

/// `x` with `before` and `after` cells of `value` on axis `at`.
fn pad_axis(
    x: &DynTensor,
    at: usize,
    before: usize,
    after: usize,
    value: f64,
) -> Result<DynTensor> {
    if before == 0 && after == 0 {
        return Ok(x.clone());
    }
    let block = |len: usize| -> Result<DynTensor> {
        let mut dims = x.dims().to_vec();
        dims[at] = len;
        DynTensor::full(&dims, value, x.dtype())
    };
    let (head, tail) = (block(before)?, block(after)?);
    DynTensor::cat(&[&head, x, &tail], at as isize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyTorch's `ceil_mode` output lengths (`torch.nn.MaxPool1d(k, s, p, ceil_mode=True)`
    /// on a length-`n` input, read from PyTorch): squeezenet's 3/2 pool on 111 gives 55,
    /// and a last window that would start in the end padding is dropped.
    #[test]
    fn ceil_mode_keeps_only_windows_starting_before_the_end_padding() {
        let window = |k: usize, s: usize, p: usize| Window {
            kernel: (1, k),
            stride: (1, s),
            pads: [(0, 0), (p, p)],
            dilation: (1, 1),
        };
        assert_eq!(window(3, 2, 0).outputs(1, 111, true), 55);
        assert_eq!(window(3, 2, 0).outputs(1, 6, true), 3);
        assert_eq!(window(3, 2, 0).outputs(1, 6, false), 2);
        // (5 + 2 - 2) / 2 = 2.5 -> 4 windows by ceil, the 4th starting at 6 >= 5 + 1
        assert_eq!(window(2, 2, 1).outputs(1, 5, true), 3);
        assert_eq!(window(3, 3, 0).outputs(1, 2, true), 0);
        // torch.nn.Conv2d(k=3, stride=2, padding=1) on 7: (7 + 2 - 3) / 2 + 1 = 4
        assert_eq!(window(3, 2, 1).outputs(1, 7, false), 4);
        let dilated = Window {
            dilation: (1, 2),
            ..window(3, 1, 0)
        };
        // dilation 2 spans 5 elements: 7 - 5 + 1 = 3
        assert_eq!(dilated.outputs(1, 7, false), 3);
        let huge = window(usize::MAX, 1, usize::MAX);
        assert_eq!(huge.outputs(1, usize::MAX, true), 1);
    }
}
