//! The seed's question (shared/seeds/001: Spring Web against Spring WebFlux,
//! `-Xmx50M`, a 5 s delay, JMeter) answered from a sweep with the seed's own
//! stack — the `spring-web` and `spring-webflux` peers — and the seed's
//! figures, drawn beside this machine's on the charts.
//!
//! What the seed reported: Spring Web's maximum response grew to 16–22 s
//! through 700 concurrent requests, it died of OutOfMemoryError at ~700 and
//! never answered again ("you need to restart the system"); WebFlux held 1000
//! at 100 % with its maximum ≈ 5 s, and at 2000 still answered (a high error
//! rate) without dying.

use super::reading::{failures, head};
use super::results::{DeathKind, Step, StepStatus, SweepResults, TargetResult};

/// The seed's thread-per-request app, as a target name.
pub const SPRING_WEB: &str = "spring-web";
/// The seed's reactive app, as a target name.
pub const SPRING_WEBFLUX: &str = "spring-webflux";
/// The seed's delay, ms.
pub const SEED_DELAY_MS: u64 = 5000;

/// One of the seed's figures, drawn on a chart: at `level` concurrent requests, `value`.
#[derive(Debug, Clone, Copy)]
pub struct SeedMark {
    /// Concurrent requests.
    pub level: f64,
    /// The figure, in the chart's unit.
    pub value: f64,
    /// What the seed said.
    pub label: &'static str,
}

/// The seed's success rates (%): Spring Web dead at ~700, WebFlux 100 % at 1000.
pub const SUCCESS_MARKS: [SeedMark; 2] = [
    SeedMark { level: 700.0, value: 0.0, label: "seed: Spring Web died at ~700 (OOM)" },
    SeedMark { level: 1000.0, value: 100.0, label: "seed: WebFlux 100 % at 1000" },
];

/// The seed's maximum response times (ms, with its 5 s delay).
pub const MAX_MARKS: [SeedMark; 3] = [
    SeedMark { level: 700.0, value: 16_000.0, label: "" },
    SeedMark { level: 700.0, value: 22_000.0, label: "seed: Spring Web 16–22 s up to 700" },
    SeedMark { level: 1000.0, value: 5_000.0, label: "seed: WebFlux ≈ 5 s at 1000" },
];

/// Sentences that answer the seed's question from `results`.
pub fn answer(results: &SweepResults) -> Vec<String> {
    let mut out = Vec::new();
    if results.delay_ms != SEED_DELAY_MS {
        out.push(format!(
            "This sweep's delay is {} ms, the seed's {} ms: response times compare as multiples of the delay.",
            results.delay_ms, SEED_DELAY_MS
        ));
    }
    let delay_ms = results.delay_ms as f64;
    match results.targets.iter().find(|t| t.name == SPRING_WEB) {
        None => out.push(format!(
            "{SPRING_WEB} did not run in this sweep (see the skipped lines), so the seed's Spring Web is not \
             answered here."
        )),
        Some(web) => {
            let run = ran(web);
            out.push(match run.iter().find(|s| s.max_ms.is_some_and(|m| m > delay_ms * 1.1)) {
                Some(s) => format!(
                    "Spring Web's slowest answer left the {} s delay at {} concurrent requests ({:.1} s, {:.1} × \
                     the delay; the seed saw 16–22 s, up to 4.4 ×, through 700).",
                    delay_ms / 1e3,
                    s.level,
                    s.max_ms.unwrap_or(0.0) / 1e3,
                    s.max_ms.unwrap_or(0.0) / delay_ms
                ),
                None => format!(
                    "Spring Web's slowest answer stayed within 1.1 × the delay at every level it ran (up to {}).",
                    run.last().map_or(0, |s| s.level)
                ),
            });
            out.push(match &web.died {
                Some(d) => {
                    let oom = if d.detail.contains("OutOfMemoryError") { " with OutOfMemoryError" } else { "" };
                    let again = match (d.how, d.answered_again) {
                        (DeathKind::Unresponsive, Some(true)) => "; it answered /test again afterwards",
                        (DeathKind::Unresponsive, _) => "; it did not answer /test again while it was probed",
                        _ => "; the process was gone",
                    };
                    format!(
                        "Spring Web died at {} concurrent requests: {}{oom}{again} ({}). The seed's died at ~700 \
                         (OutOfMemoryError) and never answered again.",
                        d.level,
                        d.how.words(),
                        head(&d.detail)
                    )
                }
                None => format!(
                    "Spring Web did not die here: alive after every level up to {} (answered all of {}{}); the \
                     seed's died at ~700.",
                    run.last().map_or(0, |s| s.level),
                    web.highest_full_success.map_or("none".to_string(), |l| l.to_string()),
                    web.recoveries
                        .iter()
                        .map(|r| format!("; stopped answering at {} and recovered after {:.1} s", r.level, r.after_s))
                        .collect::<String>()
                ),
            });
        }
    }
    match results.targets.iter().find(|t| t.name == SPRING_WEBFLUX) {
        None => out.push(format!("{SPRING_WEBFLUX} did not run in this sweep (see the skipped lines).")),
        Some(flux) => {
            let run = ran(flux);
            let full = flux.highest_full_success;
            let at_full = run.iter().find(|s| Some(s.level) == full);
            let mut sentence = match (full, at_full) {
                (Some(level), Some(s)) => format!(
                    "Spring WebFlux answered all of {level} (slowest {:.1} s there; the seed: 1000 at 100 %, \
                     max ≈ 5 s)",
                    s.max_ms.unwrap_or(0.0) / 1e3
                ),
                _ => "Spring WebFlux answered all of no level".to_string(),
            };
            let beyond: Vec<String> = run
                .iter()
                .filter(|s| full.is_none_or(|h| s.level > h))
                .map(|s| {
                    format!(
                        "{}: {:.1} % ({})",
                        s.level,
                        s.success_rate.unwrap_or(0.0) * 100.0,
                        match (s.alive_after, s.recovered_after_s) {
                            (Some(true), _) => failures(s),
                            (_, Some(after)) => format!("{}; recovered after {after:.1} s", failures(s)),
                            _ => "then down".to_string(),
                        }
                    )
                })
                .collect();
            if !beyond.is_empty() {
                sentence += &format!("; beyond it {}", beyond.join("; "));
            }
            if let Some(d) = &flux.died {
                sentence += &format!("; it died at {}: {}", d.level, d.how.words());
            } else if flux.recoveries.is_empty() {
                sentence += "; it never died";
            } else {
                sentence += "; it stopped answering for a while and recovered each time, never dying";
            }
            out.push(sentence + ". The seed's still answered at 2000 (high error rate) without dying.");
        }
    }
    out
}

/// The steps of `t` that ran.
fn ran(t: &TargetResult) -> Vec<&Step> {
    t.steps.iter().filter(|s| s.status == StepStatus::Run).collect()
}
