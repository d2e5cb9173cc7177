//! `report.svg`: the lab's point as a picture. One lane per signal over time, the targetRevision
//! changes with their short SHAs, the progress deadline, the moment the outage was detected and
//! the recovery, and the window where Argo CD said Synced while the service served nothing,
//! shaded. Drawn with plotters' SVG backend (no fonts or system libraries needed); pure
//! ([`render_svg`]) apart from [`write_report`], which reads the records and writes the file.

use crate::observe::observations::{self, Mark, MarkKind, Observation};
use crate::records::{Record, RecordPaths};
use anyhow::{bail, Context, Result};
use chrono::{DateTime, FixedOffset};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

const WIDTH: u32 = 1200;
const LEFT: i32 = 190;
const RIGHT: i32 = 30;
const TOP: i32 = 130;
const LANE: i32 = 44;
const GAP: i32 = 8;

/// The lanes, top to bottom: name and how an observation reads in it.
/// A lane: its name and how an observation reads in it.
type Lane = (&'static str, fn(&Observation) -> String);

fn lanes() -> Vec<Lane> {
    vec![
        ("Argo sync", |o| {
            o.sync.clone().unwrap_or_else(|| "-".into())
        }),
        ("Argo health", |o| {
            o.health.clone().unwrap_or_else(|| "-".into())
        }),
        ("sync operation", |o| {
            o.operation_phase.clone().unwrap_or_else(|| "-".into())
        }),
        ("observed revision", |o| {
            o.observed_revision
                .as_deref()
                .map_or("-".into(), |s| crate::sha::short(s).to_string())
        }),
        ("ready endpoints", |o| o.ready_endpoints.to_string()),
        ("HTTP", |o| match (o.http_probed, o.http_code) {
            (false, _) => "not probed".into(),
            (true, Some(c)) => c.to_string(),
            (true, None) => "no answer".into(),
        }),
        ("deadline exceeded", |o| {
            if o.progress_deadline_exceeded {
                "yes".into()
            } else {
                "no".into()
            }
        }),
    ]
}

fn color_of(lane: &str, value: &str) -> RGBColor {
    let good = RGBColor(76, 175, 80);
    let bad = RGBColor(229, 57, 53);
    let warn = RGBColor(251, 192, 45);
    let grey = RGBColor(189, 189, 189);
    match (lane, value) {
        (_, "-") | ("HTTP", "not probed") => grey,
        ("Argo sync", "Synced") | ("Argo health", "Healthy") | ("sync operation", "Succeeded") => {
            good
        }
        ("Argo sync", "OutOfSync")
        | ("Argo health", "Progressing")
        | ("sync operation", "Running") => warn,
        ("Argo health", "Degraded") | ("sync operation", "Failed" | "Error") => bad,
        ("ready endpoints", "0") | ("deadline exceeded", "yes") => bad,
        ("ready endpoints", _) | ("deadline exceeded", "no") => good,
        ("HTTP", "200") => good,
        ("HTTP", _) => bad,
        ("observed revision", v) => {
            // A stable color per revision.
            let h = v
                .bytes()
                .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
            let palette = [
                RGBColor(66, 133, 244),
                RGBColor(171, 71, 188),
                RGBColor(0, 150, 136),
                RGBColor(255, 112, 67),
            ];
            palette[(h % palette.len() as u32) as usize]
        }
        _ => grey,
    }
}

fn parse(at: &str) -> Result<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(at).with_context(|| format!("time {at:?} is not RFC 3339"))
}

/// Renders the picture (pure). Observations must be in time order (as appended).
pub fn render_svg(obs: &[Observation], marks: &[Mark]) -> Result<String> {
    if obs.is_empty() {
        bail!(
            "no observations to draw (observations.ndjson is empty or missing: run the lab first)"
        );
    }
    let t0 = parse(&obs[0].at)?;
    let secs =
        |at: &str| -> Result<f64> { Ok((parse(at)? - t0).num_milliseconds() as f64 / 1000.0) };
    let times: Vec<f64> = obs.iter().map(|o| secs(&o.at)).collect::<Result<_>>()?;
    let mark_times: Vec<f64> = marks.iter().map(|m| secs(&m.at)).collect::<Result<_>>()?;
    let t_end = times
        .iter()
        .chain(mark_times.iter())
        .cloned()
        .fold(1.0, f64::max)
        + 2.0;
    let lanes = lanes();
    let scale = Scale {
        t_start: mark_times.iter().cloned().fold(0.0, f64::min),
        t_end,
        plot_w: WIDTH as i32 - LEFT - RIGHT,
        lanes_bottom: TOP + lanes.len() as i32 * (LANE + GAP),
    };
    let height = (scale.lanes_bottom + 70) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let title = ("sans-serif", 22).into_font().color(&BLACK);
        root.draw(&Text::new(
            "\"Synced\" is not \"serving\": the lab's outage and its recovery through Git",
            (LEFT, 16),
            title,
        ))
        .map_err(drawing)?;
        draw_windows(&root, &scale, obs, &times)?;
        draw_lanes(&root, &scale, &lanes, obs, &times)?;
        draw_marks(&root, &scale, marks, &mark_times)?;
        draw_axis(&root, &scale, &obs[0].at)?;
        root.present().map_err(drawing)?;
    }
    Ok(svg)
}

type Root<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn drawing(e: DrawingAreaErrorKind<std::io::Error>) -> anyhow::Error {
    anyhow::anyhow!("drawing: {e:?}")
}

/// Seconds to x pixels, and where the lanes end.
struct Scale {
    t_start: f64,
    t_end: f64,
    plot_w: i32,
    lanes_bottom: i32,
}

impl Scale {
    fn x(&self, t: f64) -> i32 {
        LEFT + ((t - self.t_start) / (self.t_end - self.t_start) * self.plot_w as f64).round()
            as i32
    }
}

fn tiny_font() -> TextStyle<'static> {
    ("sans-serif", 11).into_font().color(&RGBColor(33, 33, 33))
}

/// The Synced-but-not-serving window(s), shaded across every lane.
fn draw_windows(root: &Root, s: &Scale, obs: &[Observation], times: &[f64]) -> Result<()> {
    let mut windows: Vec<(f64, f64)> = Vec::new();
    for (i, o) in obs.iter().enumerate() {
        let (a, b) = (times[i], times.get(i + 1).copied().unwrap_or(s.t_end));
        if o.synced_not_serving() {
            match windows.last_mut() {
                Some(w) if (w.1 - a).abs() < 1e-9 => w.1 = b,
                _ => windows.push((a, b)),
            }
        }
    }
    for (a, b) in &windows {
        let corners = [(s.x(*a), TOP - 8), (s.x(*b), s.lanes_bottom)];
        root.draw(&Rectangle::new(
            corners,
            RGBColor(229, 57, 53).mix(0.12).filled(),
        ))
        .map_err(drawing)?;
        root.draw(&Rectangle::new(
            corners,
            RGBColor(229, 57, 53).stroke_width(2),
        ))
        .map_err(drawing)?;
        if b - a < 3.0 {
            continue; // a pod starting: shaded, but too short to label legibly
        }
        let label = format!("Synced but not serving ({:.1}s)", b - a);
        let style = ("sans-serif", 14)
            .into_font()
            .color(&RGBColor(183, 28, 28))
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        root.draw(&Text::new(
            label,
            ((s.x(*a) + s.x(*b)) / 2, TOP - 10),
            style,
        ))
        .map_err(drawing)?;
    }
    Ok(())
}

/// Lanes: one colored segment per run of equal values, labelled when wide enough.
fn draw_lanes(
    root: &Root,
    s: &Scale,
    lanes: &[Lane],
    obs: &[Observation],
    times: &[f64],
) -> Result<()> {
    let small = ("sans-serif", 13).into_font().color(&BLACK);
    for (li, (name, read)) in lanes.iter().enumerate() {
        let y0 = TOP + li as i32 * (LANE + GAP);
        let label = small.clone().pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(*name, (LEFT - 10, y0 + LANE / 2), label))
            .map_err(drawing)?;
        let mut i = 0;
        while i < obs.len() {
            let v = read(&obs[i]);
            let mut j = i;
            while j + 1 < obs.len() && read(&obs[j + 1]) == v {
                j += 1;
            }
            let (a, b) = (times[i], times.get(j + 1).copied().unwrap_or(s.t_end));
            let (xa, xb) = (s.x(a), s.x(b).max(s.x(a) + 1));
            root.draw(&Rectangle::new(
                [(xa, y0), (xb, y0 + LANE)],
                color_of(name, &v).mix(0.85).filled(),
            ))
            .map_err(drawing)?;
            if xb - xa > 9 * v.len() as i32 {
                let t = tiny_font().pos(Pos::new(HPos::Center, VPos::Center));
                root.draw(&Text::new(v.clone(), ((xa + xb) / 2, y0 + LANE / 2), t))
                    .map_err(drawing)?;
            }
            i = j + 1;
        }
    }
    Ok(())
}

/// Marks: a vertical line each, labels staggered in rows above the lanes.
fn draw_marks(root: &Root, s: &Scale, marks: &[Mark], mark_times: &[f64]) -> Result<()> {
    for (k, (m, t)) in marks.iter().zip(mark_times).enumerate() {
        let color = match m.kind {
            MarkKind::TargetRevisionSet => RGBColor(33, 33, 33),
            MarkKind::ProgressDeadline => RGBColor(123, 31, 162),
            MarkKind::OutageDetected => RGBColor(198, 40, 40),
            MarkKind::Recovered => RGBColor(46, 125, 50),
        };
        let xm = s.x(*t);
        let row = TOP - 76 + (k as i32 % 4) * 15;
        root.draw(&PathElement::new(
            vec![(xm, row + 4), (xm, s.lanes_bottom + 4)],
            color.stroke_width(2),
        ))
        .map_err(drawing)?;
        let style = ("sans-serif", 12)
            .into_font()
            .color(&color)
            .pos(Pos::new(HPos::Left, VPos::Bottom));
        root.draw(&Text::new(
            format!("{} +{:.1}s", m.label, t),
            (xm + 3, row + 2),
            style,
        ))
        .map_err(drawing)?;
    }
    Ok(())
}

/// The time axis, its ticks and the legend.
fn draw_axis(root: &Root, s: &Scale, first_at: &str) -> Result<()> {
    let axis_y = s.lanes_bottom + 10;
    root.draw(&PathElement::new(
        vec![(LEFT, axis_y), (LEFT + s.plot_w, axis_y)],
        BLACK.stroke_width(1),
    ))
    .map_err(drawing)?;
    let step = [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0]
        .into_iter()
        .find(|step| (s.t_end - s.t_start) / step <= 14.0)
        .unwrap_or(300.0);
    let mut t = (s.t_start / step).ceil() * step;
    while t <= s.t_end {
        root.draw(&PathElement::new(
            vec![(s.x(t), axis_y), (s.x(t), axis_y + 5)],
            BLACK.stroke_width(1),
        ))
        .map_err(drawing)?;
        let style = tiny_font().pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(format!("{t:.0}s"), (s.x(t), axis_y + 7), style))
            .map_err(drawing)?;
        t += step;
    }
    let legend = format!(
        "seconds since the first observation ({first_at}); shaded: Argo CD reports Synced while ready endpoints are 0 or HTTP is not 200"
    );
    root.draw(&Text::new(legend, (LEFT, axis_y + 30), tiny_font()))
        .map_err(drawing)?;
    Ok(())
}

/// Reads `observations.ndjson` and the records in `evidence_dir` and (re)writes `report.svg`.
/// The picture is a rendering, not a record: regenerating it is the point.
/// `progress_deadline_seconds`: the bad release's progressDeadlineSeconds (a mark).
pub fn write_report(evidence_dir: &Path, progress_deadline_seconds: i64) -> Result<PathBuf> {
    let records = RecordPaths::new(evidence_dir);
    let obs = observations::read_all(&records.path(Record::Observations))?;
    let marks = observations::marks(&records, progress_deadline_seconds)?;
    let svg = render_svg(&obs, &marks)?;
    let path = evidence_dir.join("report.svg");
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(
        sec: u32,
        sync: &str,
        health: &str,
        rev: &str,
        endpoints: i64,
        http: Option<u16>,
    ) -> Observation {
        Observation {
            at: format!("2026-12-03T07:00:{sec:02}.000Z"),
            sync: Some(sync.into()),
            health: Some(health.into()),
            operation_phase: Some("Succeeded".into()),
            target_revision: Some(rev.into()),
            observed_revision: Some(rev.into()),
            ready_endpoints: endpoints,
            http_code: http,
            http_probed: http.is_some(),
            progress_deadline_exceeded: health == "Degraded",
        }
    }

    #[test]
    fn the_outage_window_is_drawn_labelled_with_its_length_and_the_marks() {
        let (good, bad) = (
            "1111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "2222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        );
        let run = vec![
            obs(0, "Synced", "Healthy", good, 1, Some(200)),
            obs(2, "Synced", "Progressing", bad, 0, None),
            obs(24, "Synced", "Degraded", bad, 0, Some(503)),
            obs(26, "Synced", "Healthy", good, 1, Some(200)),
        ];
        let marks = vec![
            Mark {
                kind: MarkKind::TargetRevisionSet,
                at: "2026-12-03T07:00:01.500Z".into(),
                label: "bad 2222222".into(),
            },
            Mark {
                kind: MarkKind::OutageDetected,
                at: "2026-12-03T07:00:24.000Z".into(),
                label: "outage detected".into(),
            },
        ];
        let svg = render_svg(&run, &marks).unwrap();
        for needle in [
            "Argo sync",
            "ready endpoints",
            "HTTP",
            "Synced but not serving (24.0s)",
            "2222222",
            "1111111",
            "bad 2222222 +1.5s",
            "outage detected +24.0s",
            "not probed",
            "503",
        ] {
            assert!(svg.contains(needle), "{needle} missing");
        }
        assert!(render_svg(&[], &[])
            .unwrap_err()
            .to_string()
            .contains("no observations"));
    }

    /// The x coordinates of the rectangles outlined in the outage red (the shaded windows).
    fn shaded_extents(svg: &str) -> Vec<(f64, f64)> {
        let attr = |tag: &str, name: &str| -> Option<f64> {
            let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
            tag[at..].split('"').next()?.parse().ok()
        };
        svg.split("<rect")
            .skip(1)
            .map(|r| &r[..r.find("/>").unwrap_or(r.len())])
            .filter(|r| r.contains("stroke=\"#E53935\""))
            .filter_map(|r| Some((attr(r, "x")?, attr(r, "x")? + attr(r, "width")?)))
            .collect()
    }

    #[test]
    fn the_shaded_window_spans_exactly_the_synced_but_not_serving_observations() {
        let (good, bad) = ("1".repeat(40), "2".repeat(40));
        let run = vec![
            obs(0, "Synced", "Healthy", &good, 1, Some(200)),
            obs(4, "OutOfSync", "Healthy", &good, 1, Some(200)),
            obs(6, "Synced", "Progressing", &bad, 0, Some(503)),
            obs(30, "Synced", "Degraded", &bad, 0, Some(503)),
            obs(38, "Synced", "Healthy", &good, 1, Some(200)),
        ];
        let svg = render_svg(&run, &[]).unwrap();
        let got = shaded_extents(&svg);
        // No marks: the axis runs from 0 to the last observation + 2 s.
        let (t_end, plot_w) = (40.0, (WIDTH as i32 - LEFT - RIGHT) as f64);
        let x = |t: f64| LEFT as f64 + t / t_end * plot_w;
        assert_eq!(got.len(), 1, "one window expected: {got:?}");
        let (a, b) = got[0];
        assert!((a - x(6.0)).abs() <= 1.5, "starts at {a}, want {}", x(6.0));
        assert!((b - x(38.0)).abs() <= 1.5, "ends at {b}, want {}", x(38.0));
        assert!(svg.contains("Synced but not serving (32.0s)"));
    }
}
