//! The usage chart of the profile page: requests per day of the last 30 days as bars, an SVG
//! drawn on the server by plotters (no script; its text is laid out by the browser).

use plotters::prelude::*;

const WIDTH: u32 = 720;
const HEIGHT: u32 = 260;
const FONT: &str = "sans-serif";

/// The chart of `days` (oldest first: label, requests), titled `title`; `None` when it cannot be drawn.
pub fn requests_per_day(days: &[(String, i64)], title: &str) -> Option<String> {
    let n = days.len().max(1) as i32;
    let max = days.iter().map(|(_, r)| *r).max().unwrap_or(0).max(1);
    let label = |i: &i32| days.get(*i as usize).map(|(d, _)| d.get(5..).unwrap_or(d).to_owned()).unwrap_or_default();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0..n, 0..max + max / 10 + 1)
            .ok()?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(6)
            .x_label_formatter(&label)
            .y_labels(5)
            .label_style((FONT, 13))
            .bold_line_style(RGBColor(226, 232, 240))
            .light_line_style(TRANSPARENT)
            .draw()
            .ok()?;
        let bars = days.iter().enumerate().filter(|(_, (_, r))| *r > 0);
        chart
            .draw_series(
                bars.map(|(i, (_, r))| {
                    Rectangle::new([(i as i32, 0), (i as i32 + 1, *r)], RGBColor(37, 99, 235).filled())
                }),
            )
            .ok()?;
        root.present().ok()?;
    }
    let open = out.find('>')? + 1;
    out.insert_str(open, &format!("\n<title>{}</title>", escape(title)));
    // The SVG is set in the page as is: plotters writes no script, and the only text from
    // outside is the title, escaped above.
    Some(out)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bar_per_day_with_requests() {
        let days: Vec<(String, i64)> =
            (1..=30).map(|d| (format!("2026-11-{d:02}"), i64::from(d % 3 == 0) * 5)).collect();
        let svg = super::requests_per_day(&days, "Requests <per> day").unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<title>Requests &lt;per&gt; day</title>"));
        assert_eq!(svg.matches("<rect").count(), 10, "a bar per day with requests");
        assert!(!svg.contains("<script"));
    }
}
