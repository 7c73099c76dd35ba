//! What the parsers' tests share: files in a temporary folder and
//! mutated inputs for the tests that no input makes a parser panic.

use std::path::{Path, PathBuf};

/// Writes `files` (name, text) into `dir`; the path of the first.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
    }
    dir.join(files[0].0)
}

/// A small deterministic generator (xorshift64*), so that a failing
/// mutation can be found again.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

/// `text` with a few random edits: characters deleted, duplicated or
/// replaced by ones that matter to the parsers (quotes, braces,
/// semicolons, colons, newlines, dashes, NUL).
pub fn mutate(text: &str, rng: &mut Rng) -> String {
    const SPICE: &[char] = &[
        '"', '{', '}', ';', ':', '\n', '-', '#', '/', '*', '[', ']', '\0', ' ', '@', '\'',
    ];
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(6) {
        if chars.is_empty() {
            break;
        }
        let at = rng.below(chars.len());
        match rng.below(4) {
            0 => {
                chars.remove(at);
            }
            1 => {
                let c = chars[at];
                chars.insert(at, c);
            }
            2 => chars[at] = SPICE[rng.below(SPICE.len())],
            _ => {
                let end = (at + rng.below(40)).min(chars.len());
                chars.drain(at..end);
            }
        }
    }
    chars.into_iter().collect()
}
