//! The Prometheus text exposition format, the little of it blocklab writes:
//! a metric's `# HELP` and `# TYPE` lines, and a label value escaped. Below
//! `/metrics` ([`super::metrics`]) and the runtimes' figures
//! ([`super::runtime`]), which both write metrics.

use std::fmt::Write;

/// Writes the `# HELP` and `# TYPE` lines of a metric.
pub fn help(w: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(w, "# HELP {name} {text}");
    let _ = writeln!(w, "# TYPE {name} {kind}");
}

/// A label value escaped (backslash, quote, newline).
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
