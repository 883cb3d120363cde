//! The one table style idem prints, so that every table looks alike.

use tabled::builder::Builder;
use tabled::settings::object::{Columns, Rows};
use tabled::settings::{Alignment, Modify, Style};

/// Renders rows under a header; the columns named in `right` are right-aligned.
pub fn render(header: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let mut builder = Builder::default();
    builder.push_record(header.iter().map(|h| h.to_string()));
    for row in rows {
        builder.push_record(row);
    }
    let mut table = builder.build();
    table.with(Style::rounded());
    for &col in right {
        table.with(Modify::new(Columns::new(col..=col)).with(Alignment::right()));
    }
    table.with(Modify::new(Rows::first()).with(Alignment::left()));
    table.to_string()
}
