//! Small line charts of the console's samples, drawn on the server as inline SVG: no script,
//! no external asset, nothing for the content security policy to allow. Only numbers and the
//! chart's own fixed words go into the markup.

use chrono::{DateTime, Utc};

const WIDTH: f64 = 320.0;
const HEIGHT: f64 = 120.0;
const LEFT: f64 = 40.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 20.0;

/// One line: its name (for the legend) and a value per sample time, `None` where it has none.
pub struct Series {
    pub name: &'static str,
    /// The CSS class that colours it (`line-a` to `line-d`).
    pub class: &'static str,
    pub values: Vec<Option<f64>>,
}

pub struct Chart {
    pub title: &'static str,
    pub series: Vec<Series>,
    /// The SVG, made by [`Chart::draw`].
    pub svg: String,
}

impl Chart {
    /// Draws `series` over `times` (one value of each series per time), on a time axis from
    /// `from` to `to` and a value axis from 0 to the largest value.
    pub fn draw(
        title: &'static str,
        series: Vec<Series>,
        times: &[DateTime<Utc>],
        (from, to): (DateTime<Utc>, DateTime<Utc>),
    ) -> Self {
        let top = series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .fold(0.0_f64, |a, &b| a.max(b));
        let scale = Scale {
            from,
            span_ms: (to - from).num_milliseconds().max(1) as f64,
            top: if top > 0.0 { top } else { 1.0 },
        };
        let mut svg = format!(
            r#"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}"><title>{title}</title>"#
        );
        svg.push_str(&axes(&scale, from, to));
        for line in &series {
            svg.push_str(&polylines(line, times, &scale));
        }
        svg.push_str("</svg>");
        Self { title, series, svg }
    }
}

struct Scale {
    from: DateTime<Utc>,
    span_ms: f64,
    top: f64,
}

impl Scale {
    fn x(&self, at: DateTime<Utc>) -> f64 {
        let share = (at - self.from).num_milliseconds() as f64 / self.span_ms;
        LEFT + share.clamp(0.0, 1.0) * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, value: f64) -> f64 {
        let share = (value / self.top).clamp(0.0, 1.0);
        HEIGHT - BOTTOM - share * (HEIGHT - TOP - BOTTOM)
    }
}

fn axes(scale: &Scale, from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP);
    format!(
        r#"<path class="axis" d="M{x0} {y1} V{y0} H{x1}"/><text class="tick" x="{tx}" y="{ty_top}" text-anchor="end">{top}</text><text class="tick" x="{tx}" y="{ty0}" text-anchor="end">0</text><text class="tick" x="{x0}" y="{tb}">{from}</text><text class="tick" x="{x1}" y="{tb}" text-anchor="end">{to} UTC</text>"#,
        tx = LEFT - 4.0,
        ty_top = TOP + 8.0,
        ty0 = y0,
        tb = HEIGHT - 4.0,
        top = round_label(scale.top),
        from = from.format("%H:%M"),
        to = to.format("%H:%M"),
    )
}

/// A number as a tick label: whole when large, one decimal when small.
fn round_label(value: f64) -> String {
    if value >= 10.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The series as polylines, broken where it has no value; a lone point is a dot.
fn polylines(series: &Series, times: &[DateTime<Utc>], scale: &Scale) -> String {
    let mut out = String::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    let flush = |run: &mut Vec<(f64, f64)>, out: &mut String| {
        match run.as_slice() {
            [] => {}
            [(x, y)] => out.push_str(&format!(
                r#"<circle class="{}" cx="{x:.1}" cy="{y:.1}" r="1.5"/>"#,
                series.class
            )),
            points => {
                let points: Vec<String> = points
                    .iter()
                    .map(|(x, y)| format!("{x:.1},{y:.1}"))
                    .collect();
                out.push_str(&format!(
                    r#"<polyline class="{}" points="{}"/>"#,
                    series.class,
                    points.join(" ")
                ));
            }
        }
        run.clear();
    };
    for (at, value) in times.iter().zip(&series.values) {
        match value {
            Some(v) => run.push((scale.x(*at), scale.y(*v))),
            None => flush(&mut run, &mut out),
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 3, 10, minute, 0).unwrap()
    }

    fn line(values: Vec<Option<f64>>) -> Vec<Series> {
        vec![Series {
            name: "waiting",
            class: "line-a",
            values,
        }]
    }

    #[test]
    fn the_largest_value_touches_the_top_and_zero_the_axis() {
        let times = [at(0), at(30), at(60 - 1)];
        let chart = Chart::draw(
            "Deliveries waiting",
            line(vec![Some(0.0), Some(8.0), Some(4.0)]),
            &times,
            (at(0), at(59)),
        );
        // x from 40 to 312, y from 100 (zero) to 8 (the top).
        assert!(
            chart
                .svg
                .contains(r#"points="40.0,100.0 178.3,8.0 312.0,54.0""#),
            "{}",
            chart.svg
        );
        assert!(chart.svg.contains(">8</text>"), "{}", chart.svg);
        assert!(chart.svg.contains("10:00") && chart.svg.contains("10:59 UTC"));
    }

    #[test]
    fn a_missing_value_breaks_the_line_and_a_lone_point_is_a_dot() {
        let times = [at(0), at(1), at(2), at(3)];
        let chart = Chart::draw(
            "Outbox lag",
            line(vec![Some(1.0), Some(2.0), None, Some(2.0)]),
            &times,
            (at(0), at(3)),
        );
        assert_eq!(chart.svg.matches("<polyline").count(), 1, "{}", chart.svg);
        assert_eq!(chart.svg.matches("<circle").count(), 1, "{}", chart.svg);
    }

    #[test]
    fn no_values_draw_axes_only() {
        let chart = Chart::draw("Dead letters", line(vec![]), &[], (at(0), at(1)));
        assert!(!chart.svg.contains("<polyline") && !chart.svg.contains("<circle"));
        assert!(chart.svg.starts_with("<svg") && chart.svg.ends_with("</svg>"));
    }
}
