//! The sweep's outputs: `results.md` (the seed's variables per target and
//! level, and where each target stopped coping), `results.json`,
//! `results.csv`, and the one-line progress of each step.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::step::Outcome;
use super::{Death, Step, StepStatus, SweepResults, TargetResult};

/// One line for stderr after a step.
pub fn progress_line(target: &str, step: &Step, died: Option<&Death>) -> String {
    let mut line = format!(
        "{target:<10} {:>6} concurrent: {:>5.1} % ok, min {} ms, max {} ms, peak {}, {} threads",
        step.level,
        step.success_rate.unwrap_or(0.0) * 100.0,
        ms(step.min_ms),
        ms(step.max_ms),
        mib(step.peak_memory_bytes),
        step.peak_threads.map_or("-".to_string(), |t| t.to_string())
    );
    if let Some(death) = died {
        let _ = write!(line, "; DOWN: {} ({})", death.how.words(), first_line(&death.detail));
    }
    line
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.0}"))
}

fn mib(v: Option<u64>) -> String {
    v.map_or("-".to_string(), |b| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64))
}

fn first_line(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("");
    &line[..line.len().min(160)]
}

/// Where a target stopped coping, in words.
pub fn verdict(target: &TargetResult) -> String {
    let held = match target.highest_full_success {
        Some(level) => format!("100 % up to {level}"),
        None => "never 100 %".to_string(),
    };
    match &target.died {
        Some(d) if d.level == 0 => format!("{}: {}", d.how.words(), first_line(&d.detail)),
        Some(d) => format!("{held}; {} at {}", d.how.words(), d.level),
        None => format!("{held}; alive to the end"),
    }
}

/// `results.md`.
pub fn markdown(results: &SweepResults) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# blocklab sweep, {}\n", results.started);
    let _ = writeln!(
        md,
        "Each request: `GET /delay?ms={}` on its own connection; all connections of a level opened \
         first, then every request sent at once. Timeout {} ms per request. Targets on CPUs {}, \
         load on CPUs {}. JVM peers: `{}`. Rust targets: {}.\n",
        results.delay_ms,
        results.timeout_ms,
        crate::harness::placement::list(&results.placement.server_cpus),
        crate::harness::placement::list(&results.placement.load_cpus),
        results.jvm_opts,
        results.allocator
    );
    for w in &results.warnings {
        let _ = writeln!(md, "**Warning:** {w}\n");
    }
    if results.interrupted {
        let _ = writeln!(md, "**Interrupted:** partial results.\n");
    }
    let _ = writeln!(md, "## Reading\n");
    for sentence in super::html::reading(results) {
        let _ = writeln!(md, "- {sentence}");
    }
    let _ = writeln!(md, "\n## Where each target stopped coping\n");
    let _ = writeln!(md, "| target | memory cap | verdict |");
    let _ = writeln!(md, "|---|---|---|");
    for t in &results.targets {
        let _ = writeln!(md, "| {} | {} | {} |", t.name, t.cap, verdict(t));
    }
    let _ = writeln!(md, "\n## Per level\n");
    let _ = writeln!(
        md,
        "Success: 2xx within the timeout. Response times of the successes, from the send to the \
         whole response. Peak memory: the target's cgroup, page cache excluded, sampled every 50 ms.\n"
    );
    let _ = writeln!(
        md,
        "| target | concurrent | success % | min ms | p50 ms | p99 ms | max ms | failures | peak memory | peak threads | after |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for t in &results.targets {
        for s in &t.steps {
            let after = match (s.status, s.alive_after) {
                (StepStatus::NotRunDown, _) => "not run: down".to_string(),
                (StepStatus::NotRunInterrupted, _) => "not run: interrupted".to_string(),
                (StepStatus::Run, Some(true)) => "alive".to_string(),
                (StepStatus::Run, _) => {
                    t.died.as_ref().map_or("down".to_string(), |d| d.how.words().to_string())
                }
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                t.name,
                s.level,
                s.success_rate.map_or("-".to_string(), |r| format!("{:.1}", r * 100.0)),
                ms(s.min_ms),
                ms(s.p50_ms),
                ms(s.p99_ms),
                ms(s.max_ms),
                failures(s),
                mib(s.peak_memory_bytes),
                s.peak_threads.map_or("-".to_string(), |t| t.to_string()),
                after
            );
        }
    }
    md
}

/// The non-ok outcomes of a step, e.g. "timeout 12, refused 3".
pub fn failures(step: &Step) -> String {
    let Some(load) = &step.load else { return "-".to_string() };
    let parts: Vec<String> = Outcome::ALL
        .into_iter()
        .filter(|o| *o != Outcome::Ok && load.count(*o) > 0)
        .map(|o| format!("{} {}", o.name(), load.count(o)))
        .collect();
    if parts.is_empty() { "0".to_string() } else { parts.join(", ") }
}

/// `results.csv`: one row per target and level.
pub fn csv(results: &SweepResults) -> String {
    let mut out = String::from(
        "target,level,status,success_rate,min_ms,p50_ms,p99_ms,max_ms,connect_max_ms,peak_memory_bytes,cgroup_peak_bytes,peak_threads,alive_after",
    );
    for o in Outcome::ALL {
        let _ = write!(out, ",{}", o.name());
    }
    // The run's warnings (no cap, shared CPUs) travel with every row.
    out.push_str(",warnings\n");
    let warnings = csv_field(&results.warnings.join("; "));
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    for t in &results.targets {
        for s in &t.steps {
            let status = serde_json::to_value(s.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            let _ = write!(
                out,
                "{},{},{status},{},{},{},{},{},{},{},{},{},{}",
                csv_field(&t.name),
                s.level,
                opt(s.success_rate),
                opt(s.min_ms),
                opt(s.p50_ms),
                opt(s.p99_ms),
                opt(s.max_ms),
                opt(s.load.as_ref().map(|l| l.connect_max_ms)),
                s.peak_memory_bytes.map_or(String::new(), |v| v.to_string()),
                s.cgroup_peak_bytes.map_or(String::new(), |v| v.to_string()),
                s.peak_threads.map_or(String::new(), |v| v.to_string()),
                s.alive_after.map_or(String::new(), |v| v.to_string()),
            );
            for o in Outcome::ALL {
                let _ = write!(out, ",{}", s.load.as_ref().map_or(String::new(), |l| l.count(o).to_string()));
            }
            let _ = writeln!(out, ",{warnings}");
        }
    }
    out
}

fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n', ';']) { format!("\"{}\"", v.replace('"', "\"\"")) } else { v.to_string() }
}

/// Writes `results.md`, `results.json`, `results.csv`, the charts and
/// `report.html` into `dir`.
pub fn write_all(results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir.join("charts"))?;
    let reading = super::html::reading(results);
    let charts = super::charts::all(results);
    let mut files = vec![
        ("results.md".to_string(), markdown(results)),
        ("results.json".to_string(), serde_json::to_string_pretty(results)? + "\n"),
        ("results.csv".to_string(), csv(results)),
        ("report.html".to_string(), super::html::page(results, &reading, &charts)),
    ];
    files.extend(charts.into_iter().map(|c| (format!("charts/{}", c.file), c.svg)));
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
