//! Exact sizes for the saved-tensor prints.
//!
//! The instrumentation computes each saved tensor's bytes as `nelement() × element_size()` and,
//! in its first format, prints them only as MB with one decimal (`(0.1 MB)`), which loses up to
//! 0.05 MiB per tensor and prints every tensor under 52 KiB as 0. Its newer format prints the
//! bytes beside the MB (`(0.1 MB, 65536 bytes)`). Contract:
//! - [`tensor_size`]: printed bytes when there, else the shape × the dtype's element size (the
//!   print's own formula, so exact), else the rounded MB, marked as such.
//! - [`group_size`]: printed bytes in the summary when there; else the sum of the group's tensors
//!   when each is exact and the summary agrees with it (same count, and each sum within the
//!   0.05 MiB the summary's rounding allows); else the summary's rounded MB.

use crate::schema::{GroupSizeFrom, SavedGroup, SizeFrom};

const MIB: i64 = 1 << 20;
/// How far the bytes read back from a figure printed as MB with one decimal can be from the
/// bytes it was printed from: half a tenth of a MiB (52428.8), plus the half byte lost when the
/// printed MB are turned back into bytes.
const HALF_TENTH_MIB: i64 = MIB / 20 + 1;

/// Bytes per element of a dtype as PyTorch prints it (`torch.bfloat16`); `None` when unknown.
pub fn element_size(dtype: &str) -> Option<i64> {
    let name = dtype.strip_prefix("torch.").unwrap_or(dtype);
    Some(match name {
        "bool" | "uint8" | "int8" | "quint8" | "qint8" => 1,
        n if n.starts_with("float8") => 1,
        "float16" | "half" | "bfloat16" | "int16" | "uint16" | "short" => 2,
        "float32" | "float" | "int32" | "uint32" | "int" | "qint32" | "complex32" => 4,
        "float64" | "double" | "int64" | "uint64" | "long" | "complex64" => 8,
        "complex128" => 16,
        _ => return None,
    })
}

/// The size of one saved tensor: (bytes, where they come from).
pub fn tensor_size(
    printed: i64,
    printed_exact: bool,
    shape: Option<&[u64]>,
    dtype: &str,
) -> (i64, SizeFrom) {
    if printed_exact {
        return (printed, SizeFrom::PrintedBytes);
    }
    let computed = shape.zip(element_size(dtype)).and_then(|(dims, size)| {
        dims.iter()
            .try_fold(size, |acc, &d| acc.checked_mul(i64::try_from(d).ok()?))
    });
    match computed {
        // The print rounded these very bytes: anything further off is not the same tensor.
        Some(bytes) if bytes.abs_diff(printed) <= HALF_TENTH_MIB as u64 => {
            (bytes, SizeFrom::ShapeAndDtype)
        }
        _ => (printed, SizeFrom::RoundedMb),
    }
}

/// Settles a group's sizes once its summary line came: `(activations, weights, count, exact)`
/// as the summary printed them.
pub fn group_size(group: &mut SavedGroup, activations: i64, weights: i64, count: u64, exact: bool) {
    group.complete = true;
    if exact {
        (group.activations, group.weights, group.count) = (activations, weights, count);
        group.size_from = GroupSizeFrom::PrintedBytes;
        group.bytes_exact = true;
        return;
    }
    let all_exact = group.tensors.iter().all(|t| t.bytes_exact);
    let agrees = |sum: i64, printed: i64| sum.abs_diff(printed) <= HALF_TENTH_MIB as u64;
    let (sum_activ, sum_weight) = sums(group);
    if all_exact
        && group.tensors.len() as u64 == count
        && agrees(sum_activ, activations)
        && agrees(sum_weight, weights)
    {
        (group.activations, group.weights, group.count) = (sum_activ, sum_weight, count);
        group.size_from = GroupSizeFrom::TensorSum;
        group.bytes_exact = true;
    } else {
        (group.activations, group.weights, group.count) = (activations, weights, count);
        group.size_from = GroupSizeFrom::RoundedMb;
        group.bytes_exact = false;
    }
}

/// The activation and weight bytes of a group's tensors.
pub fn sums(group: &SavedGroup) -> (i64, i64) {
    group.tensors.iter().fold((0, 0), |(a, w), t| {
        if t.weight {
            (a, w.saturating_add(t.size))
        } else {
            (a.saturating_add(t.size), w)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SavedTensor;

    #[test]
    fn an_old_print_gets_its_exact_bytes_back_from_shape_and_dtype() {
        // `(128, 256) torch.bfloat16 (0.1 MB)`: 65536 bytes, printed as 0.1 MB (104858 bytes).
        let tenth = MIB / 10;
        assert_eq!(
            tensor_size(tenth, false, Some(&[128, 256]), "torch.bfloat16"),
            (65_536, SizeFrom::ShapeAndDtype)
        );
        assert_eq!(
            tensor_size(0, false, Some(&[2048]), "torch.int64"),
            (16_384, SizeFrom::ShapeAndDtype)
        );
        assert_eq!(
            tensor_size(0, false, Some(&[]), "torch.float32"),
            (4, SizeFrom::ShapeAndDtype),
            "a scalar"
        );
        // 1.25 MiB prints as `1.2 MB` (round half to even): 52428.8 bytes off, the most there is.
        assert_eq!(
            tensor_size(MIB * 12 / 10, false, Some(&[2560, 256]), "torch.bfloat16"),
            (1_310_720, SizeFrom::ShapeAndDtype)
        );
        assert_eq!(
            tensor_size(tenth, false, Some(&[128, 256]), "torch.mystery"),
            (tenth, SizeFrom::RoundedMb)
        );
        assert_eq!(
            tensor_size(tenth, false, Some(&[4096, 4096]), "torch.bfloat16"),
            (tenth, SizeFrom::RoundedMb),
            "a shape that disagrees with the printed MB is not trusted"
        );
        assert_eq!(
            tensor_size(65_536, true, None, "torch.bfloat16"),
            (65_536, SizeFrom::PrintedBytes)
        );
    }

    fn tensor(weight: bool, size: i64, bytes_exact: bool) -> SavedTensor {
        SavedTensor {
            weight,
            shape: None,
            dtype: "bfloat16".into(),
            size,
            size_from: if bytes_exact {
                SizeFrom::ShapeAndDtype
            } else {
                SizeFrom::RoundedMb
            },
            bytes_exact,
        }
    }

    fn group(tensors: Vec<SavedTensor>) -> SavedGroup {
        SavedGroup {
            pass: 0,
            layer: Some(2),
            stage: "stage1".to_owned(),
            activations: 0,
            weights: 0,
            count: 0,
            complete: false,
            size_from: GroupSizeFrom::RoundedMb,
            bytes_exact: false,
            tensors,
        }
    }

    #[test]
    fn a_summary_that_agrees_with_exact_tensors_gives_their_sum() {
        let mut g = group(vec![
            tensor(false, 65_536, true),
            tensor(true, 196_608, true),
        ]);
        group_size(&mut g, MIB / 10, 2 * MIB / 10, 2, false);
        assert_eq!(
            (g.activations, g.weights, g.size_from, g.bytes_exact),
            (65_536, 196_608, GroupSizeFrom::TensorSum, true)
        );
        let mut g = group(vec![tensor(false, 65_536, true)]);
        group_size(&mut g, MIB / 10, 0, 2, false);
        assert_eq!(
            (g.activations, g.size_from, g.bytes_exact),
            (MIB / 10, GroupSizeFrom::RoundedMb, false),
            "a tensor line missing: the summary's figure stands"
        );
        let mut g = group(vec![tensor(false, 65_536, false)]);
        group_size(&mut g, 262_144, 0, 1, true);
        assert_eq!(
            (g.activations, g.size_from, g.bytes_exact),
            (262_144, GroupSizeFrom::PrintedBytes, true)
        );
    }
}
