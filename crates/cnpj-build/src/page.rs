//! The build report as one self-contained HTML page, written beside the JSON: the anomalies the
//! guard found (on top), the headline, bar charts drawn by `plotters` as inline SVG (rows per
//! table this month and last, changes by event and by state, rejects by reason, time per stage)
//! and the files. Nothing is fetched to view it: the CSS and a small script are inline, and the
//! text is set in the viewer's own sans-serif. The script writes every chart's measured size and
//! number of bars into `#chart-measurements` (what the end-to-end test reads in headless Chromium).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{BuildReport, Count};

/// Where the page of the report written to `json` goes: beside it, the same name with `.html` for
/// its extension (`out/r.json` → `out/r.html`, `run`'s `build-report.json` → `build-report.html`),
/// so that reports sharing a folder keep a page each. A report itself named `*.html` gets `.html`
/// appended instead of being overwritten by its page.
pub fn page_path(json: &Path) -> PathBuf {
    let page = json.with_extension("html");
    if page != json {
        return page;
    }
    let mut name = json.as_os_str().to_owned();
    name.push(".html");
    PathBuf::from(name)
}

/// The page of a report.
pub fn render(report: &BuildReport) -> std::io::Result<String> {
    let month = report.source_month.as_deref().unwrap_or("unknown month");
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Build report {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>Build report: {}</h1>\n",
        esc(month),
        esc(month)
    );
    anomalies(&mut html, report);
    headline(&mut html, report);
    html.push_str("<div class=\"charts\">\n");
    for chart in charts(report) {
        match chart {
            Ok(chart) => figure(&mut html, &chart).map_err(std::io::Error::other)?,
            Err((id, title, note)) => {
                let _ = writeln!(
                    html,
                    "<section class=\"chart none\" id=\"chart-{id}\">\n<h2>{}</h2>\n<p>{}</p>\n</section>",
                    esc(title),
                    esc(&note)
                );
            }
        }
    }
    html.push_str("</div>\n");
    files(&mut html, report);
    html.push_str("<pre id=\"chart-measurements\" hidden></pre>\n<script>");
    html.push_str(MEASURE);
    html.push_str("</script>\n</body>\n</html>\n");
    Ok(html)
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 2rem auto; max-width: 64rem; padding: 0 1rem; color: #1e293b; }
h1 { font-size: 1.6rem; }
h2 { font-size: 1.15rem; margin: 0 0 0.5rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.25rem 1rem; }
dt { color: #475569; }
dd { margin: 0; font-variant-numeric: tabular-nums; }
section, figure { margin: 1.5rem 0; }
.anomalies { border: 2px solid #dc2626; background: #fef2f2; padding: 0.75rem 1rem; }
.warnings { border-left: 4px solid #d97706; padding-left: 1rem; }
.chart svg { max-width: 100%; height: auto; display: block; }
.chart.none p { color: #475569; font-style: italic; }
.legend span { display: inline-block; width: 0.9em; height: 0.9em; margin: 0 0.3em 0 1em; vertical-align: middle; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { padding: 0.2rem 0.6rem; border-bottom: 1px solid #e2e8f0; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
";

/// Measures every chart once the page is read: the bars (`rect`) it draws, their area, and the
/// size of everything drawn, as JSON in `#chart-measurements`.
const MEASURE: &str = "
(function () {
  var out = [];
  document.querySelectorAll('figure.chart').forEach(function (figure) {
    var svg = figure.querySelector('svg');
    var bars = svg.querySelectorAll('rect');
    var area = 0;
    bars.forEach(function (bar) { var b = bar.getBBox(); area += b.width * b.height; });
    var drawn = svg.getBBox();
    var title = svg.querySelector('title');
    out.push({
      chart: figure.id,
      heading: figure.querySelector('h2').textContent,
      title: title ? title.textContent : '',
      bars: bars.length,
      bar_area: Math.round(area),
      texts: svg.querySelectorAll('text').length,
      width: Math.round(drawn.width),
      height: Math.round(drawn.height)
    });
  });
  document.getElementById('chart-measurements').textContent = JSON.stringify(out);
})();
";

fn anomalies(html: &mut String, report: &BuildReport) {
    let Some(mom) = report.month_over_month.as_ref().filter(|m| !m.anomalies.is_empty()) else { return };
    let verdict = if mom.anomalies_accepted {
        "Accepted with --accept-anomalies: the build went on regardless."
    } else {
        "Not accepted."
    };
    let _ = writeln!(
        html,
        "<section class=\"anomalies\" id=\"anomalies\">\n<h2>Anomalies ({})</h2>\n<p>{verdict}</p>\n<ul>",
        mom.anomalies.len()
    );
    for a in &mom.anomalies {
        let subject = if a.subject.is_empty() { String::new() } else { format!(" ({})", esc(&a.subject)) };
        let _ = writeln!(
            html,
            "<li><strong>{}</strong>{subject}: {} <small>(previous {}, now {}, threshold {})</small></li>",
            esc(&a.kind),
            esc(&a.message),
            number(a.previous),
            number(a.current),
            number(a.threshold)
        );
    }
    html.push_str("</ul>\n</section>\n");
}

fn headline(html: &mut String, r: &BuildReport) {
    let mut rows: Vec<(&str, String)> = Vec::new();
    let mut row = |name, value| rows.push((name, value));
    row("Month", esc(r.source_month.as_deref().unwrap_or("unknown")));
    row("Dataset", esc(&r.dataset));
    row("Input", esc(&r.input));
    row("Built at", esc(&r.built_at));
    if let Some(mom) = &r.month_over_month {
        let month = mom.previous_month.as_deref().unwrap_or("unknown month");
        row("Previous month", format!("{} ({})", esc(month), esc(&mom.previous_dataset)));
    }
    row("Rows read", thousands(r.rows_read));
    row("Rows loaded", thousands(r.rows_loaded));
    row("Rows rejected", thousands(r.rows_rejected));
    row("Duplicates", format!("{} ({} differing)", thousands(r.duplicates), thousands(r.duplicates_differing)));
    row("Establishments without a company", thousands(r.estabelecimentos_sem_empresa));
    row("Unknown codes", thousands(r.unknown_codes.len() as u64));
    row("Capital values not loaded", thousands(r.capital_not_loaded.iter().map(|c| c.rows).sum()));
    row("Ignored files", thousands(r.ignored_files.len() as u64));
    row("Total time", seconds(r.seconds.total));
    row("Warnings", thousands(r.warnings.len() as u64));
    html.push_str("<section class=\"headline\">\n<dl>\n");
    for (name, value) in rows {
        let _ = writeln!(html, "<dt>{name}</dt><dd>{value}</dd>");
    }
    html.push_str("</dl>\n</section>\n");
    if !r.warnings.is_empty() {
        html.push_str("<section class=\"warnings\">\n<h2>Warnings</h2>\n<ul>\n");
        for w in &r.warnings {
            let _ = writeln!(html, "<li>{}</li>", esc(w));
        }
        html.push_str("</ul>\n</section>\n");
    }
}

fn files(html: &mut String, r: &BuildReport) {
    html.push_str(
        "<section class=\"files\">\n<h2>Files</h2>\n<table>\n<tr><th>Zip</th><th>Member</th><th>Kind</th>\
         <th>Read</th><th>Loaded</th><th>Rejected</th><th>Duplicates</th><th>Differing</th></tr>\n",
    );
    for f in &r.files {
        let _ = write!(html, "<tr><td>{}</td><td>{}</td><td>{}</td>", esc(&f.zip), esc(&f.member), f.kind.name());
        for n in [f.rows_read, f.rows_loaded, f.rows_rejected, f.duplicates, f.duplicates_differing] {
            let _ = write!(html, "<td class=\"n\">{}</td>", thousands(n));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n</section>\n");
}

fn counts_table(html: &mut String, name: &str, counts: &[Count]) {
    let _ = writeln!(html, "<table>\n<tr><th>{name}</th><th>Rows</th></tr>");
    for c in counts {
        let _ = writeln!(html, "<tr><td>{}</td><td class=\"n\">{}</td></tr>", esc(&c.name), thousands(c.count));
    }
    html.push_str("</table>\n");
}

/// A horizontal bar chart: a row per category, in it a bar per series (bars of 0 are not drawn).
struct Chart {
    id: &'static str,
    title: &'static str,
    categories: Vec<String>,
    series: Vec<Series>,
    unit: Unit,
    /// Listed whole below the chart (whose labels are cut): `(heading, counts)`.
    table: Option<(&'static str, Vec<Count>)>,
}

struct Series {
    name: String,
    color: RGBColor,
    values: Vec<f64>,
}

#[derive(Clone, Copy)]
enum Unit {
    Rows,
    Seconds,
}

impl Unit {
    fn tick(self, v: f64) -> String {
        match self {
            // Row counts are whole: no tick at a fraction.
            Unit::Rows if v.fract() != 0.0 => String::new(),
            Unit::Rows => compact(v),
            Unit::Seconds => format!("{} s", trimmed(v, 2)),
        }
    }

    fn value(self, v: f64) -> String {
        match self {
            Unit::Rows => thousands(v as u64),
            Unit::Seconds => seconds(v),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Rows => "rows",
            Unit::Seconds => "seconds",
        }
    }
}

const THIS_MONTH: RGBColor = RGBColor(37, 99, 235);
const LAST_MONTH: RGBColor = RGBColor(148, 163, 184);
const EVENTS: RGBColor = RGBColor(13, 148, 136);
const STATES: RGBColor = RGBColor(124, 58, 237);
const REJECTS: RGBColor = RGBColor(220, 38, 38);
const TIME: RGBColor = RGBColor(217, 119, 6);

/// A chart that has nothing to draw: its id, title and why.
type Missing = (&'static str, &'static str, String);

/// The charts of a report, in page order; in place of one with nothing to draw, why.
fn charts(r: &BuildReport) -> Vec<Result<Chart, Missing>> {
    let no_previous = || "No previous month to compare with: the build was not given one (--previous).".to_owned();
    let (events, states) = match &r.month_over_month {
        Some(mom) => (
            counted("events", "Changes by event", &mom.events, EVENTS, "No change was recorded.", None),
            counted("states", "Changes by state", &mom.states, STATES, "No change was recorded.", None),
        ),
        None => {
            (Err(("events", "Changes by event", no_previous())), Err(("states", "Changes by state", no_previous())))
        }
    };
    vec![
        drawn(rows_chart(r)).map_err(|(id, title)| (id, title, "The dataset has no rows.".to_owned())),
        events,
        states,
        counted("rejects", "Rejects by reason", &r.rejects_by_reason, REJECTS, "No row was rejected.", Some("Reason")),
        drawn(time_chart(r)).map_err(|(id, title)| (id, title, "No time was measured.".to_owned())),
    ]
}

/// Rows per table this month, and last month's beside them when there is one.
fn rows_chart(r: &BuildReport) -> Chart {
    let this_month = r.source_month.clone().map_or_else(|| "this month".to_owned(), |m| format!("this month ({m})"));
    let mut rows = Chart {
        id: "rows",
        title: "Rows per table",
        categories: r.tables.iter().map(|t| t.table.clone()).collect(),
        series: vec![Series {
            name: this_month,
            color: THIS_MONTH,
            values: r.tables.iter().map(|t| t.rows as f64).collect(),
        }],
        unit: Unit::Rows,
        table: None,
    };
    if let Some(mom) = &r.month_over_month {
        // Tables only the previous dataset had come last, with no bar this month.
        for t in &mom.tables {
            if !rows.categories.contains(&t.table) {
                rows.categories.push(t.table.clone());
                rows.series[0].values.push(0.0);
            }
        }
        let previous = rows
            .categories
            .iter()
            .map(|c| mom.tables.iter().find(|t| &t.table == c).map_or(0.0, |t| t.previous as f64))
            .collect();
        let name = mom.previous_month.clone().map_or_else(|| "last month".to_owned(), |m| format!("last month ({m})"));
        rows.series.insert(0, Series { name, color: LAST_MONTH, values: previous });
    }
    rows
}

/// A chart of `counts` (listed whole below it under `table`'s heading, when given); `none` says
/// why in its place when there is nothing to draw.
fn counted(
    id: &'static str,
    title: &'static str,
    counts: &[Count],
    color: RGBColor,
    none: &str,
    table: Option<&'static str>,
) -> Result<Chart, Missing> {
    drawn(Chart {
        id,
        title,
        categories: counts.iter().map(|c| c.name.clone()).collect(),
        series: vec![Series { name: title.to_owned(), color, values: counts.iter().map(|c| c.count as f64).collect() }],
        unit: Unit::Rows,
        table: table.map(|heading| (heading, counts.to_vec())),
    })
    .map_err(|(id, title)| (id, title, none.to_owned()))
}

/// Seconds per stage of the build.
fn time_chart(r: &BuildReport) -> Chart {
    let s = &r.seconds;
    let stages = [
        ("lookups", s.lookups),
        ("load", s.load),
        ("transform", s.transform),
        ("changes", s.changes),
        ("serving files", s.serving_files),
        ("total", s.total),
    ];
    Chart {
        id: "time",
        title: "Time per stage",
        categories: stages.iter().map(|(name, _)| (*name).to_owned()).collect(),
        series: vec![Series {
            name: "seconds".to_owned(),
            color: TIME,
            values: stages.iter().map(|(_, s)| *s).collect(),
        }],
        unit: Unit::Seconds,
        table: None,
    }
}

/// The chart, if it has a bar to draw.
fn drawn(chart: Chart) -> Result<Chart, (&'static str, &'static str)> {
    if chart.series.iter().any(|s| s.values.iter().any(|v| *v > 0.0)) {
        Ok(chart)
    } else {
        Err((chart.id, chart.title))
    }
}

fn figure(html: &mut String, chart: &Chart) -> Result<(), String> {
    let svg = svg(chart)?;
    let _ = write!(html, "<figure class=\"chart\" id=\"chart-{}\">\n<h2>{}</h2>\n{svg}", chart.id, esc(chart.title));
    if chart.series.len() > 1 {
        html.push_str("<figcaption class=\"legend\">");
        for s in &chart.series {
            let RGBColor(r, g, b) = s.color;
            let _ = write!(html, "<span style=\"background: rgb({r}, {g}, {b})\"></span>{}", esc(&s.name));
        }
        html.push_str("</figcaption>\n");
    }
    if let Some((heading, counts)) = &chart.table {
        counts_table(html, heading, counts);
    }
    html.push_str("</figure>\n");
    Ok(())
}

const WIDTH: u32 = 760;
const FONT: &str = "sans-serif";
/// Category labels longer than this are cut (with `…`) in the chart.
const MAX_LABEL: usize = 48;
/// Pixels: one bar, the space above a row's first bar and below its last, the gap below a bar.
const BAR: i32 = 18;
const PAD: i32 = 5;
const GAP: i32 = 3;

/// The chart as an SVG element with a `<title>`.
fn svg(chart: &Chart) -> Result<String, String> {
    let n = chart.categories.len();
    // The y axis counts pixels (about): each category is `row` high, the first on top.
    let row = 2 * PAD + BAR * chart.series.len() as i32;
    let height = (row * n as i32) as u32 + 60;
    let labels: Vec<String> = chart.categories.iter().map(|c| cut(c, MAX_LABEL)).collect();
    let label_area = (labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32 * 7 + 16).clamp(48, 360);
    let max = chart.series.iter().flat_map(|s| s.values.iter().copied()).fold(0.0, f64::max);
    let x_max = if max > 0.0 { max * 1.02 } else { 1.0 };
    let centers: Vec<i32> = (0..n as i32).map(|i| i * row + row / 2).collect();
    let label = |y: &i32| labels.get(n.saturating_sub(1 + (*y / row) as usize)).cloned().unwrap_or_default();
    let unit = chart.unit;
    let tick = |v: &f64| unit.tick(*v);
    let failed = |e: DrawingAreaErrorKind<_>| format!("drawing the chart {:?}: {e}", chart.title);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        let mut ctx = ChartBuilder::on(&root)
            .margin(10)
            .margin_right(110)
            .x_label_area_size(40)
            .y_label_area_size(label_area)
            .build_cartesian_2d(0.0..x_max, (0..row * n as i32).with_key_points(centers))
            .map_err(failed)?;
        ctx.configure_mesh()
            .disable_y_mesh()
            .x_labels(6)
            .x_label_formatter(&tick)
            .y_label_formatter(&label)
            .x_desc(unit.name())
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 16))
            .bold_line_style(RGBColor(226, 232, 240))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(failed)?;
        let value_style = TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        for (j, s) in chart.series.iter().enumerate() {
            // The top and bottom of bar `j` in category `i`.
            let span = |i: usize| {
                let top = (n - i) as i32 * row - PAD - BAR * j as i32;
                (top, top - (BAR - GAP))
            };
            let bars = s.values.iter().enumerate().filter(|(_, v)| **v > 0.0);
            ctx.draw_series(bars.clone().map(|(i, &v)| {
                let (top, bottom) = span(i);
                // At least a pixel or so wide: a bar that is there is seen.
                Rectangle::new([(0.0, top), (v.max(x_max / 400.0), bottom)], s.color.filled())
            }))
            .map_err(failed)?;
            ctx.draw_series(bars.map(|(i, &v)| {
                let (top, bottom) = span(i);
                EmptyElement::at((v, (top + bottom) / 2)) + Text::new(unit.value(v), (4, 0), value_style.clone())
            }))
            .map_err(failed)?;
        }
        root.present().map_err(failed)?;
    }
    let open = out.find('>').ok_or("plotters wrote no <svg> element")? + 1;
    out.insert_str(open, &format!("\n<title>{}</title>", esc(chart.title)));
    Ok(out)
}

/// Text for HTML (element content and quoted attribute values).
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max - 1) {
        Some((at, _)) if text.chars().count() > max => format!("{}…", &text[..at]),
        _ => text.to_owned(),
    }
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 4 / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `v` with up to `places` decimals, trailing zeros dropped.
fn trimmed(v: f64, places: usize) -> String {
    let text = format!("{v:.places$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_owned() } else { text }
}

/// A tick of a row axis: `2500000` → `2.5M`.
fn compact(v: f64) -> String {
    let (scale, suffix) = match v.abs() {
        a if a >= 1e9 => (1e9, "B"),
        a if a >= 1e6 => (1e6, "M"),
        a if a >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    format!("{}{suffix}", trimmed(v / scale, 2))
}

fn seconds(v: f64) -> String {
    let places = if v >= 10.0 {
        1
    } else if v >= 0.1 {
        2
    } else {
        3
    };
    format!("{v:.places$} s")
}

/// An anomaly's figure: a count with separators, a ratio with up to four decimals.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}{}", thousands(v.abs() as u64))
    } else {
        trimmed(v, 4)
    }
}

#[cfg(test)]
mod tests {
    use cnpj_model::FileKind;

    use super::*;
    use crate::report::{Anomaly, FileReport, MonthOverMonth, TableRows, TableThenNow, Timings};

    fn count(name: &str, count: u64) -> Count {
        Count { name: name.to_owned(), count }
    }

    /// A month built without a previous one.
    fn alone() -> BuildReport {
        let tables = [("estabelecimentos", 1_200_000), ("empresas", 900_000), ("rejects", 3), ("duplicates", 0)];
        BuildReport {
            source_month: Some("2026-09".into()),
            built_at: "2026-10-02T03:04:05Z".into(),
            input: "/data/2026-09".into(),
            dataset: "/srv/registry.duckdb".into(),
            files: vec![FileReport {
                zip: "Empresas0.zip".into(),
                member: "K3241.K03200Y0.D60913.EMPRECSV".into(),
                kind: FileKind::Empresas,
                rows_read: 1_234_567,
                rows_loaded: 1_234_560,
                rows_rejected: 3,
                duplicates: 4,
                duplicates_differing: 1,
            }],
            ignored_files: vec![],
            tables: tables.iter().map(|(t, n)| TableRows { table: (*t).into(), rows: *n }).collect(),
            rows_read: 1_234_567,
            rows_loaded: 1_234_560,
            rows_rejected: 3,
            rejects_by_reason: vec![count("expected … fields, found …", 2), count("invalid year …", 1)],
            duplicates: 4,
            duplicates_differing: 1,
            estabelecimentos_sem_empresa: 0,
            unknown_codes: vec![],
            untranslated: vec![],
            capital_not_loaded: vec![],
            warnings: vec!["Socios1.zip has no rows".into()],
            month_over_month: None,
            seconds: Timings {
                lookups: 0.5,
                load: 30.0,
                transform: 2.0,
                changes: 0.0,
                serving_files: 4.0,
                total: 36.5,
            },
        }
    }

    /// The same month against the previous one, with an anomaly.
    fn against_last() -> BuildReport {
        let tables = [("estabelecimentos", 1_100_000, 1_200_000), ("empresas", 880_000, 900_000), ("simples", 7, 0)];
        BuildReport {
            month_over_month: Some(MonthOverMonth {
                previous_month: Some("2026-08".into()),
                previous_dataset: "/srv/registry-2026-08.duckdb".into(),
                tables: tables
                    .iter()
                    .map(|(t, previous, current)| TableThenNow {
                        table: (*t).into(),
                        previous: *previous,
                        current: *current,
                    })
                    .collect(),
                events: vec![count("opened", 40_000), count("closed", 12_000), count("moved", 900)],
                states: vec![count("SP", 20_000), count("MG", 9_000)],
                history_rows: 0,
                anomalies: vec![Anomaly {
                    kind: "table_shrank".into(),
                    subject: "simples".into(),
                    previous: 7.0,
                    current: 0.0,
                    threshold: 0.5,
                    message: "simples has 0 rows, was 7 (< 50 %)".into(),
                }],
                anomalies_accepted: true,
            }),
            ..alone()
        }
    }

    /// The page of `report` holds every one of `present` and none of `absent`; returned.
    fn check(report: &BuildReport, present: &[&str], absent: &[&str]) -> String {
        let page = render(report).unwrap();
        for text in present {
            assert!(page.contains(text), "{text:?} missing from the page:\n{page}");
        }
        for text in absent {
            assert!(!page.contains(text), "{text:?} is on the page:\n{page}");
        }
        page
    }

    /// The element of the page with this id (a chart's figure or section), up to its end.
    fn element<'a>(page: &'a str, id: &str) -> &'a str {
        let start = page.find(&format!(" id=\"{id}\"")).unwrap_or_else(|| panic!("no element {id}"));
        let end = ["</figure>", "</section>"].iter().filter_map(|e| page[start..].find(e)).min().unwrap();
        &page[start..start + end]
    }

    fn bars(page: &str, id: &str) -> usize {
        element(page, id).matches("<rect").count()
    }

    #[test]
    fn a_month_alone() {
        let page = check(
            &alone(),
            &[
                "<!DOCTYPE html>",
                "<title>Build report 2026-09</title>",
                "<dt>Month</dt><dd>2026-09</dd>",
                "<dt>Dataset</dt><dd>/srv/registry.duckdb</dd>",
                "<dt>Built at</dt><dd>2026-10-02T03:04:05Z</dd>",
                "<dt>Rows read</dt><dd>1,234,567</dd>",
                "<dt>Rows loaded</dt><dd>1,234,560</dd>",
                "<dt>Rows rejected</dt><dd>3</dd>",
                "<dt>Duplicates</dt><dd>4 (1 differing)</dd>",
                "<dt>Warnings</dt><dd>1</dd>",
                "<li>Socios1.zip has no rows</li>",
                "<td>Empresas0.zip</td><td>K3241.K03200Y0.D60913.EMPRECSV</td><td>empresas</td>",
                "<td class=\"n\">1,234,567</td>",
                "<h2>Rows per table</h2>",
                "<title>Rows per table</title>",
                "<h2>Rejects by reason</h2>",
                "<title>Rejects by reason</title>",
                "<td>expected … fields, found …</td><td class=\"n\">2</td>",
                "<h2>Time per stage</h2>",
                "<title>Time per stage</title>",
                "36.5 s",
                "1,200,000",
                "id=\"chart-measurements\"",
            ],
            // Nothing to fetch.
            &["id=\"anomalies\"", "<title>Changes by event</title>", "<figcaption", "src=", "href=", "url(", "@import"],
        );
        for id in ["chart-events", "chart-states"] {
            assert!(element(&page, id).contains("No previous month to compare with"), "{id}");
        }
        // A bar per table with rows (none for an empty table), per reason, per stage that took time.
        assert_eq!(bars(&page, "chart-rows"), 3);
        assert_eq!(bars(&page, "chart-rejects"), 2);
        assert_eq!(bars(&page, "chart-time"), 5);
        assert!(element(&page, "chart-rows").contains("\nduplicates\n</text>"), "every table is labelled");
    }

    #[test]
    fn a_month_against_the_last() {
        let page = check(
            &against_last(),
            &[
                "<h2>Anomalies (1)</h2>",
                "Accepted with --accept-anomalies",
                "<strong>table_shrank</strong> (simples): simples has 0 rows, was 7 (&lt; 50 %)",
                "(previous 7, now 0, threshold 0.5)",
                "<dt>Previous month</dt><dd>2026-08 (/srv/registry-2026-08.duckdb)</dd>",
                "last month (2026-08)",
                "this month (2026-09)",
                "<title>Changes by event</title>",
                "<title>Changes by state</title>",
                "40,000",
            ],
            &["No previous month"],
        );
        // The anomalies come first.
        assert!(page.find("id=\"anomalies\"").unwrap() < page.find("class=\"headline\"").unwrap());
        // Then and now side by side: a bar for each that has rows; simples is only last month's.
        assert_eq!(bars(&page, "chart-rows"), 6);
        assert!(element(&page, "chart-rows").contains("\nsimples\n</text>"));
        assert_eq!(bars(&page, "chart-events"), 3);
        assert_eq!(bars(&page, "chart-states"), 2);
        assert!(element(&page, "chart-states").contains("\nSP\n</text>"));
    }

    #[test]
    fn nothing_to_draw_is_said_in_place_of_a_chart() {
        let mut report = against_last();
        report.rejects_by_reason.clear();
        report.seconds = Timings::default();
        let mom = report.month_over_month.as_mut().unwrap();
        mom.events.clear();
        mom.states.clear();
        mom.anomalies.clear();
        let page = check(&report, &["No row was rejected.", "No time was measured."], &["id=\"anomalies\""]);
        for id in ["chart-events", "chart-states", "chart-rejects", "chart-time"] {
            assert!(element(&page, id).starts_with(&format!(" id=\"{id}\">\n<h2>")), "{id}");
            assert_eq!(bars(&page, id), 0, "{id}");
        }
        assert!(element(&page, "chart-events").contains("No change was recorded."));
    }

    #[test]
    fn every_text_is_escaped() {
        let mut report = alone();
        report.dataset = "/tmp/<b>&\"x'.duckdb".into();
        let reason = format!("<script>alert(1)</script> {}", "long ".repeat(20));
        report.rejects_by_reason = vec![count(&reason, 5)];
        report.warnings = vec!["a & b <i>".into()];
        let page = check(
            &report,
            &[
                "<dd>/tmp/&lt;b&gt;&amp;&quot;x&#39;.duckdb</dd>",
                "<li>a &amp; b &lt;i&gt;</li>",
                &format!("<td>{}</td>", esc(&reason)),
                // Cut in the chart, whole in the table below it.
                "\n&lt;script&gt;alert(1)&lt;/script&gt; long long long long l…\n</text>",
            ],
            &["<b>", "<i>", "<script>alert"],
        );
        assert_eq!(page.matches("<script>").count(), 1, "only the page's own script");
    }

    #[test]
    fn numbers_are_written_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(62_345_678), "62,345,678");
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(2_500_000.0), "2.5M");
        assert_eq!(compact(1_250.0), "1.25k");
        assert_eq!(Unit::Rows.tick(0.5), "");
        assert_eq!(Unit::Seconds.tick(0.5), "0.5 s");
        assert_eq!(seconds(713.46), "713.5 s");
        assert_eq!(seconds(0.0123), "0.012 s");
        assert_eq!(number(-1_500.0), "-1,500");
        assert_eq!(number(0.125), "0.125");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcd", 4), "abcd");
    }

    #[test]
    fn the_page_is_named_after_its_report() {
        let check = |json: &str, page: &str| assert_eq!(page_path(Path::new(json)), Path::new(page), "{json}");
        check("out/r.json", "out/r.html");
        check("WORK/2026-09/build-report.json", "WORK/2026-09/build-report.html");
        check("report", "report.html");
        check("out/r.html", "out/r.html.html");
    }
}
