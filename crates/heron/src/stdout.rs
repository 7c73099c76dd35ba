//! The command line's output. `print!` panics when its reader has gone
//! (`heron ctl keys | head -1`); here that ends the process quietly with
//! success, as `--help` does, and any other write error ends it with the
//! reason.

use std::fmt;
use std::io::{self, Write};

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*)) };
}

/// `println!` through [`write`].
macro_rules! outln {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Writes to standard output; exits if it cannot.
pub fn write(args: fmt::Arguments) {
    if let Err(e) = io::stdout().lock().write_fmt(args) {
        std::process::exit(exit_code(&e));
    }
}

/// 0 for a reader that went away, after saying nothing; 1 otherwise,
/// after saying why.
fn exit_code(error: &io::Error) -> i32 {
    if error.kind() == io::ErrorKind::BrokenPipe {
        return 0;
    }
    eprintln!("heron: cannot write the output: {error}");
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_that_went_away_is_no_error_and_others_are() {
        assert_eq!(exit_code(&io::ErrorKind::BrokenPipe.into()), 0);
        assert_eq!(exit_code(&io::Error::from_raw_os_error(28)), 1); // ENOSPC
    }
}
