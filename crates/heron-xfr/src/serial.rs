//! Serial number arithmetic (RFC 1982): SOA serials wrap around, so
//! "newer" means "less than half the number space ahead".

use std::cmp::Ordering;

/// Compares two serials; None when they are exactly half the space apart,
/// which RFC 1982 3.2 leaves undefined.
pub fn compare(a: u32, b: u32) -> Option<Ordering> {
    const HALF: u32 = 1 << 31;
    if a == b {
        Some(Ordering::Equal)
    } else if a.wrapping_sub(b) == HALF {
        None
    } else if b.wrapping_sub(a) < HALF {
        Some(Ordering::Less)
    } else {
        Some(Ordering::Greater)
    }
}

/// Whether `a` is a newer serial than `b`.
pub fn is_newer(a: u32, b: u32) -> bool {
    compare(a, b) == Some(Ordering::Greater)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_order() {
        assert!(is_newer(2, 1));
        assert!(!is_newer(1, 2));
        assert!(!is_newer(7, 7));
    }

    #[test]
    fn wraps_around() {
        assert!(is_newer(0, u32::MAX));
        assert!(is_newer(5, u32::MAX - 5));
        assert!(!is_newer(u32::MAX, 0));
    }

    #[test]
    fn half_the_space_apart_is_undefined() {
        assert_eq!(compare(0, 1 << 31), None);
        assert_eq!(compare(1 << 31, 0), None);
        assert!(!is_newer(1 << 31, 0));
        assert_eq!(compare(0, (1 << 31) - 1), Some(Ordering::Less));
        assert_eq!(compare(0, (1 << 31) + 1), Some(Ordering::Greater));
    }
}
