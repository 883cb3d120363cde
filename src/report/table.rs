//! The one table style idem prints, so that every table looks alike, fitted to the screen.
//!
//! A table wider than the screen first wraps its text columns at spaces,
//! the widest first and never narrower than their longest word; the figures
//! (the right-aligned columns) stay on one line, only their headers wrap. If that is not
//! enough, each row becomes a block of `name  value` lines instead: a
//! narrower layout, never a cut figure.

use tabled::builder::Builder;
use tabled::settings::object::{Columns, Rows};
use tabled::settings::{Alignment, Modify, Style};

use super::width::{fit, visible, width};

/// Columns every cell of a table costs besides its text: a border and a
/// space on each side.
const CELL_COST: usize = 3;

/// Renders rows under a header; the columns named in `right` are right-aligned.
pub fn render(header: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let screen = width();
    side_by_side(header, &rows, right, screen)
        .unwrap_or_else(|| without_constant_columns(header, &rows, right, screen))
}

/// The table with its columns side by side, text columns wrapped to fit
/// `screen`; `None` if even wrapped they do not fit.
fn side_by_side(
    header: &[&str],
    rows: &[Vec<String>],
    right: &[usize],
    screen: usize,
) -> Option<String> {
    let natural = natural_widths(header, rows);
    let total: usize = natural.iter().map(|w| w + CELL_COST).sum::<usize>() + 1;
    let widths = match total > screen {
        true => narrowed(header, rows, right, &natural, total - screen)?,
        false => natural.clone(),
    };
    // Cells of narrowed columns are wrapped here, at spaces, so that a
    // continued line starts with a word, not with the space before it.
    let wrap = |col: usize, text: &str| -> String {
        match widths.get(col) {
            Some(&w) if w < natural[col] => wrap_cell(text, w),
            _ => text.to_string(),
        }
    };
    let mut builder = Builder::default();
    builder.push_record(header.iter().enumerate().map(|(c, h)| wrap(c, h)));
    for row in rows {
        builder.push_record(row.iter().enumerate().map(|(c, cell)| wrap(c, cell)));
    }
    let mut table = builder.build();
    table.with(Style::rounded());
    for &col in right {
        table.with(Modify::new(Columns::new(col..=col)).with(Alignment::right()));
    }
    table.with(Modify::new(Rows::first()).with(Alignment::left()));
    Some(table.to_string())
}

/// Each column's width: its widest cell, header included.
fn natural_widths(header: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    (0..header.len())
        .map(|col| {
            rows.iter()
                .filter_map(|r| r.get(col))
                .map(|c| c.lines().map(visible).max().unwrap_or(0))
                .chain([visible(header[col])])
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Widths that save `excess` columns by wrapping text columns, the widest
/// first, none below its longest word; `None` if that cannot be done.
fn narrowed(
    header: &[&str],
    rows: &[Vec<String>],
    right: &[usize],
    natural: &[usize],
    mut excess: usize,
) -> Option<Vec<usize>> {
    let longest_word = |text: &str| {
        text.split_whitespace()
            .flat_map(after_hyphens)
            .map(visible)
            .max()
            .unwrap_or(0)
    };
    let floor: Vec<usize> = (0..natural.len())
        .map(|col| {
            // A figure stays on one line; only its header may wrap.
            if right.contains(&col) {
                let cells = rows.iter().filter_map(|r| r.get(col));
                let widest = cells.map(|c| visible(c)).max().unwrap_or(0);
                return widest.max(longest_word(header[col]));
            }
            rows.iter()
                .filter_map(|r| r.get(col))
                .map(|c| longest_word(c))
                .chain([longest_word(header[col])])
                .max()
                .unwrap_or(0)
                .max(6)
                .min(natural[col])
        })
        .collect();
    let mut widths = natural.to_vec();
    // First the figures' headers wrap (their cells stay as they are)...
    for &col in right {
        if let (Some(w), Some(&f)) = (widths.get_mut(col), floor.get(col)) {
            let saved = (*w - f).min(excess);
            *w -= saved;
            excess -= saved;
        }
    }
    // ...then the widest text column gives a column, again and again.
    while excess > 0 {
        let widest = (0..widths.len())
            .filter(|&c| widths[c] > floor[c])
            .max_by_key(|&c| widths[c])?;
        widths[widest] -= 1;
        excess -= 1;
    }
    Some(widths)
}

/// When the table cannot be narrowed: first the columns that say the same
/// in every row leave it for a line below (`every row: timeout 0, asked 10
/// XP`), so that the rest can stay side by side; only if that is not
/// enough, one block per row.
fn without_constant_columns(
    header: &[&str],
    rows: &[Vec<String>],
    right: &[usize],
    screen: usize,
) -> String {
    let constant = |col: usize| {
        let first = rows.first().and_then(|r| r.get(col));
        rows.len() > 1 && rows.iter().all(|r| r.get(col) == first)
    };
    let same: Vec<usize> = (0..header.len()).filter(|&c| constant(c)).collect();
    let kept: Vec<usize> = (0..header.len()).filter(|c| !same.contains(c)).collect();
    let kept_header: Vec<&str> = kept.iter().map(|&c| header[c]).collect();
    let kept_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| kept.iter().filter_map(|&c| r.get(c).cloned()).collect())
        .collect();
    let kept_right: Vec<usize> = kept
        .iter()
        .enumerate()
        .filter(|(_, c)| right.contains(c))
        .map(|(i, _)| i)
        .collect();
    let table = match same.is_empty() || kept.is_empty() {
        true => None,
        false => side_by_side(&kept_header, &kept_rows, &kept_right, screen),
    };
    let Some(table) = table else {
        return records(header, rows, screen);
    };
    let said: Vec<String> = same
        .iter()
        .filter(|&&c| !rows[0][c].trim().is_empty())
        .map(|&c| format!("{} {}", header[c], rows[0][c].trim()))
        .collect();
    match said.is_empty() {
        true => table,
        false => format!(
            "{table}\n{}",
            fit(&format!("(every row: {})", said.join(", ")), screen)
        ),
    }
}

/// A word cut after each of its hyphens: `claim-work-complete` is
/// `claim-`, `work-`, `complete`.
fn after_hyphens(word: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = word;
    while let Some(at) = rest.find('-').filter(|&at| at + 1 < rest.len()) {
        pieces.push(&rest[..=at]);
        rest = &rest[at + 1..];
    }
    pieces.push(rest);
    pieces
}

/// A cell's text in lines no wider than `width`: wrapped at spaces, and a
/// word wider than that after its hyphens too.
pub fn wrap_cell(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in text.split('\n') {
        let mut current = String::new();
        for word in line.split(' ') {
            let pieces = match visible(word) > width {
                true => after_hyphens(word),
                false => vec![word],
            };
            for (k, piece) in pieces.into_iter().enumerate() {
                let gap = if k == 0 { " " } else { "" };
                if current.is_empty() {
                    current.push_str(piece);
                } else if visible(&current) + gap.len() + visible(piece) > width {
                    lines.push(std::mem::take(&mut current));
                    current.push_str(piece);
                } else {
                    current.push_str(gap);
                    current.push_str(piece);
                }
            }
        }
        lines.push(current);
    }
    lines.join("\n")
}

/// The narrow layout: one block per row, a `name  value` line per column.
fn records(header: &[&str], rows: &[Vec<String>], screen: usize) -> String {
    let label = header.iter().map(|h| visible(h)).max().unwrap_or(0);
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for (col, cell) in row.iter().enumerate() {
            let cell = cell.trim();
            if cell.is_empty() {
                continue;
            }
            let name = header.get(col).copied().unwrap_or("");
            let pad = " ".repeat(label.saturating_sub(visible(name)));
            let indent = " ".repeat(label + 4);
            // The value wraps under itself, not under the names.
            let value = fit(&format!("{indent}{cell}"), screen);
            let value = value.trim_start_matches(' ');
            out.push_str(&format!("  {name}{pad}  {value}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widest(text: &str) -> usize {
        text.lines().map(visible).max().unwrap_or(0)
    }

    #[test]
    fn a_narrow_screen_wraps_text_and_keeps_figures_whole() {
        let rows = vec![vec![
            "1".to_string(),
            "a long sentence that says what the worker did with its key".to_string(),
            "12345.6 ms".to_string(),
        ]];
        let wide = natural_widths(&["worker", "did", "answered at"], &rows);
        let narrowed =
            narrowed(&["worker", "did", "answered at"], &rows, &[0, 2], &wide, 30).unwrap();
        assert_eq!(narrowed[0], wide[0]);
        // "answered at" wraps its header down to its cells' width first.
        assert_eq!(narrowed[2], "12345.6 ms".len());
        let saved = wide[2] - narrowed[2];
        assert_eq!(narrowed[1], wide[1] - (30 - saved));
    }

    #[test]
    fn too_many_columns_become_records() {
        let header: Vec<String> = (0..12).map(|i| format!("column {i}")).collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let rows = vec![
            (0..12)
                .map(|i| format!("value-{i}-0000"))
                .collect::<Vec<_>>(),
        ];
        let text = records(&header, &rows, 40);
        assert!(widest(&text) <= 40, "{text}");
        assert!(text.contains("column 11  value-11-0000"));
    }
}
