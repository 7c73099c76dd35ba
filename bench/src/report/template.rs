//! The report's prose: `template.md`, in named parts, each with `{{name}}`
//! placeholders that the section functions fill.

const TEXT: &str = include_str!("template.md");
const MARKER: &str = "<!-- part: ";

/// The text of part `name`: the lines after its marker up to the next
/// marker. A missing part is a bug in the report, not in the results.
fn part(name: &str) -> &'static str {
    let marker = format!("{MARKER}{name} -->\n");
    let start = TEXT
        .find(&marker)
        .unwrap_or_else(|| panic!("template.md has no part {name}"))
        + marker.len();
    let end = TEXT[start..].find(MARKER).map_or(TEXT.len(), |i| start + i);
    &TEXT[start..end]
}

/// Part `name` with its placeholders filled from `values`, in one pass
/// (a value is never scanned for placeholders). A placeholder alone on
/// its line stands for whole lines: the value brings its own line ends
/// (see [`lines`]), and an empty value removes the line.
pub fn fill(name: &str, values: &[(&str, String)]) -> String {
    let value = |key: &str| {
        values
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("part {name} of template.md: no value for {{{{{key}}}}}"))
    };
    let mut out = String::new();
    for line in part(name).split_inclusive('\n') {
        let bare = line.trim_end_matches('\n');
        match placeholder(bare) {
            Some((key, rest)) if rest.is_empty() && bare.starts_with("{{") => {
                out.push_str(value(key))
            }
            _ => fill_line(line, &value, &mut out),
        }
    }
    out
}

/// Part `name` filled, as a piece of a line (without its line end).
pub fn inline(name: &str, values: &[(&str, String)]) -> String {
    let mut text = fill(name, values);
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

/// Each item as a line: the value of a placeholder alone on its line.
pub fn lines<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    items
        .into_iter()
        .map(|item| format!("{}\n", item.as_ref()))
        .collect()
}

fn fill_line<'v>(line: &str, value: &impl Fn(&str) -> &'v str, out: &mut String) {
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        match placeholder(&rest[start..]) {
            Some((key, after)) => {
                out.push_str(value(key));
                rest = after;
            }
            None => {
                out.push_str("{{");
                rest = &rest[start + 2..];
            }
        }
    }
    out.push_str(rest);
}

/// The name of the placeholder `text` starts with, and what follows it.
fn placeholder(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix("{{")?;
    let end = inner.find("}}")?;
    let key = &inner[..end];
    let named = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    named.then(|| (key, &inner[end + 2..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_is_found_and_placeholders_are_named() {
        for name in ["page", "method", "environment", "targets", "notes"] {
            assert!(!part(name).contains(MARKER), "{name}");
        }
        assert_eq!(placeholder("{{rows}} x"), Some(("rows", " x")));
        assert_eq!(placeholder("{{not a name}}"), None);
    }

    #[test]
    fn a_placeholder_alone_on_its_line_is_whole_lines() {
        let rows = lines(["| a |", "| b |"]);
        assert_eq!(rows, "| a |\n| b |\n");
        let text = fill("errors", &[("list", rows)]);
        assert_eq!(text, "\n## Errors\n\n| a |\n| b |\n");
        // Empty: the line goes, the lines around it stay.
        assert_eq!(
            fill("errors", &[("list", String::new())]),
            "\n## Errors\n\n"
        );
    }

    #[test]
    #[should_panic(expected = "no value for {{what}}")]
    fn a_placeholder_without_a_value_is_a_bug() {
        fill("limit_failed", &[("ratio", "1".into())]);
    }
}
