//! Growing the tables that hold one entry per secondary zone.
//!
//! A `Vec` grown by pushing doubles its room: a catalog that grows to
//! 100,000 members one at a time can leave up to 100,000 entries of room
//! unused for good (at 48 octets an entry, 4.8 MB a table). These grow
//! by an eighth of what they hold instead: a little more copying as they
//! grow, at most an eighth unused.

/// Makes room in `table` for `total` entries in all, growing it by at
/// least an eighth of its length.
pub(crate) fn reserve_by_eighths<T>(table: &mut Vec<T>, total: usize) {
    let len = table.len();
    if table.capacity() < total {
        table.reserve_exact((total - len).max(len / 8));
    }
}

/// Makes room in `table` for one more entry, by eighths.
pub(crate) fn reserve_one_more<T>(table: &mut Vec<T>) {
    let total = table.len() + 1;
    reserve_by_eighths(table, total);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_grown_one_at_a_time_keeps_at_most_an_eighth_unused() {
        let mut table: Vec<u64> = Vec::new();
        for i in 0..100_000u64 {
            reserve_one_more(&mut table);
            table.push(i);
            assert!(table.capacity() <= table.len() + table.len() / 8 + 1);
        }
    }

    #[test]
    fn room_already_there_is_not_added_to() {
        let mut table: Vec<u8> = Vec::with_capacity(100);
        reserve_by_eighths(&mut table, 100);
        assert_eq!(table.capacity(), 100);
        table.push(1);
        reserve_by_eighths(&mut table, 101);
        assert!(table.capacity() >= 101);
    }
}
