//! Per-item transforms for [`Dataset::map`](super::Dataset::map) and
//! [`Dataset::map_random`](super::Dataset::map_random), like torchvision's: each returns a
//! closure over [`Sample`]s.
//!
//! Images are `[C, H, W]` (a `[H, W]` image is treated as one channel). Random transforms
//! draw from the generator the loader gives each item, so augmentation is reproducible for
//! any number of workers.

use super::sample::{Features, Sample, Target};
use crate::error::{Error, Result, ShapeError};
use crate::rng::Generator;

/// `(x - mean[c]) / std[c]` per channel; one value of each applies to every channel.
pub fn normalize(
    mean: &[f32],
    std: &[f32],
) -> Result<impl Fn(Sample) -> Result<Sample> + Send + Sync + Clone + use<>> {
    if mean.is_empty() || mean.len() != std.len() {
        return Err(Error::InvalidArgument {
            op: "normalize",
            message: format!(
                "needs as many means as standard deviations, at least one (got {} and {})",
                mean.len(),
                std.len()
            ),
        });
    }
    if let Some(s) = std.iter().find(|s| s.is_nan() || **s <= 0.0) {
        return Err(Error::InvalidArgument {
            op: "normalize",
            message: format!("standard deviation {s} is not positive"),
        });
    }
    let (mean, std) = (mean.to_vec(), std.to_vec());
    Ok(move |mut sample: Sample| {
        let channels = mean.len();
        let plane = if channels == 1 {
            sample.input.values.len()
        } else {
            match sample.input.dims.first() {
                Some(&c) if c == channels => sample.input.values.len() / c,
                _ => {
                    return Err(ShapeError::Invalid {
                        context: "normalize".into(),
                        message: format!(
                            "{channels} channel statistics for an input of dims {:?}; the first axis must be the channel axis",
                            sample.input.dims
                        ),
                    }
                    .into());
                }
            }
        };
        for (c, values) in sample.input.values.chunks_mut(plane.max(1)).enumerate() {
            let (m, s) = (mean[c % channels], std[c % channels]);
            values.iter_mut().for_each(|v| *v = (*v - m) / s);
        }
        Ok(sample)
    })
}

/// `(channels, height, width)` of an image input.
fn image_dims(features: &Features, op: &str) -> Result<(usize, usize, usize)> {
    match features.dims[..] {
        [h, w] => Ok((1, h, w)),
        [c, h, w] => Ok((c, h, w)),
        _ => Err(ShapeError::Invalid {
            context: op.into(),
            message: format!(
                "expects an image [C, H, W] or [H, W], got dims {:?}",
                features.dims
            ),
        }
        .into()),
    }
}

/// A random `height x width` window of the image after zero-padding every side by
/// `padding` (the CIFAR-style augmentation).
pub fn random_crop(
    height: usize,
    width: usize,
    padding: usize,
) -> impl Fn(Sample, &mut Generator) -> Result<Sample> + Send + Sync + Clone {
    move |mut sample: Sample, rng: &mut Generator| {
        let (c, h, w) = image_dims(&sample.input, "random_crop")?;
        let (ph, pw) = (h + 2 * padding, w + 2 * padding);
        if height > ph || width > pw || height == 0 || width == 0 {
            return Err(ShapeError::Invalid {
                context: "random_crop".into(),
                message: format!(
                    "a {height}x{width} crop does not fit a {h}x{w} image padded by {padding}"
                ),
            }
            .into());
        }
        let top = rng.below((ph - height + 1) as u64) as usize;
        let left = rng.below((pw - width + 1) as u64) as usize;
        let mut out = Vec::with_capacity(c * height * width);
        for plane in sample.input.values.chunks(h * w).take(c) {
            for y in top..top + height {
                for x in left..left + width {
                    let inside =
                        (padding..padding + h).contains(&y) && (padding..padding + w).contains(&x);
                    out.push(if inside {
                        plane[(y - padding) * w + (x - padding)]
                    } else {
                        0.0
                    });
                }
            }
        }
        let dims = if sample.input.dims.len() == 2 {
            vec![height, width]
        } else {
            vec![c, height, width]
        };
        sample.input = Features::new(out, &dims)?;
        Ok(sample)
    }
}

/// Mirrors the image left-right with probability `p`.
pub fn random_horizontal_flip(
    p: f64,
) -> impl Fn(Sample, &mut Generator) -> Result<Sample> + Send + Sync + Clone {
    move |mut sample: Sample, rng: &mut Generator| {
        let (_, _, w) = image_dims(&sample.input, "random_horizontal_flip")?;
        if rng.next_f64() < p && w > 0 {
            sample
                .input
                .values
                .chunks_mut(w)
                .for_each(|row| row.reverse());
        }
        Ok(sample)
    }
}

/// Replaces a class target with a one-hot vector of `classes` values (for MSE or
/// soft-label losses); a class outside `0..classes` is an error.
pub fn one_hot(classes: usize) -> impl Fn(Sample) -> Result<Sample> + Send + Sync + Clone {
    move |mut sample: Sample| {
        if let Target::Class(class) = sample.target {
            if class < 0 || class as usize >= classes {
                return Err(Error::IndexOutOfRange {
                    op: "one_hot",
                    index: class,
                    axis: 0,
                    size: classes,
                });
            }
            let mut values = vec![0.0; classes];
            values[class as usize] = 1.0;
            sample.target = Target::Values(Features::vector(values));
        }
        Ok(sample)
    }
}

/// Reshapes the input to `dims` (e.g. `[784]` for an MLP, `[1, 28, 28]` for a CNN).
pub fn reshape(dims: &[usize]) -> impl Fn(Sample) -> Result<Sample> + Send + Sync + Clone + use<> {
    let dims = dims.to_vec();
    move |mut sample: Sample| {
        sample.input = sample.input.reshape(&dims)?;
        Ok(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(values: Vec<f32>, dims: &[usize]) -> Sample {
        Sample::classified(Features::new(values, dims).unwrap(), 1)
    }

    #[test]
    fn normalize_per_channel() {
        let f = normalize(&[1.0, 10.0], &[2.0, 5.0]).unwrap();
        let out = f(image(vec![3.0, 5.0, 20.0, 30.0], &[2, 1, 2])).unwrap();
        assert_eq!(out.input.values, vec![1.0, 2.0, 2.0, 4.0]);
        assert!(f(image(vec![0.0; 3], &[3, 1, 1])).is_err());
        assert!(normalize(&[0.0], &[0.0]).is_err());
    }

    #[test]
    fn crop_keeps_a_window_of_the_padded_image() {
        let values: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let crop = random_crop(3, 3, 1);
        let mut rng = Generator::new(3);
        for _ in 0..50 {
            let out = crop(image(values.clone(), &[1, 3, 3]), &mut rng).unwrap();
            assert_eq!(out.input.dims, vec![1, 3, 3]);
            // Every window of the zero-padded image keeps the center pixel 5 somewhere, and
            // pixels keep their neighbours: the window is a shift of the original.
            assert!(out.input.values.contains(&5.0));
            assert!(
                out.input
                    .values
                    .iter()
                    .all(|v| values.contains(v) || *v == 0.0)
            );
        }
        let unpadded = random_crop(3, 3, 0)(image(values.clone(), &[3, 3]), &mut rng).unwrap();
        assert_eq!(unpadded.input.values, values);
        assert!(random_crop(5, 5, 0)(image(values, &[3, 3]), &mut rng).is_err());
    }

    #[test]
    fn flip_mirrors_rows_and_one_hot_checks_the_class() {
        let flip = random_horizontal_flip(1.0);
        let out = flip(
            image(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]),
            &mut Generator::new(0),
        )
        .unwrap();
        assert_eq!(out.input.values, vec![2.0, 1.0, 4.0, 3.0]);
        let hot = one_hot(3)(image(vec![0.0], &[1])).unwrap();
        assert_eq!(
            hot.target,
            Target::Values(Features::vector(vec![0.0, 1.0, 0.0]))
        );
        assert!(one_hot(1)(image(vec![0.0], &[1])).is_err());
    }
}
