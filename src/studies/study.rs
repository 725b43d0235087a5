//! The shape of a study, as the main job (`blocklab studies`) sees it: its
//! name, what it measures, how its plan is checked and how it runs. Below
//! the list of studies (`studies/mod.rs`) and every study, which all use it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::failure::Failure;

/// One study, as the main job sees it.
pub struct Study {
    /// Its subcommand.
    pub command: &'static str,
    /// Its folder under the main job's output.
    pub folder: &'static str,
    /// Its title on the index page.
    pub title: &'static str,
    /// What it measures, in a sentence.
    pub summary: &'static str,
    /// Validates its default flags writing into `out` (`--quick` when true),
    /// before anything runs.
    pub check: fn(&Path, bool) -> Result<(), String>,
    /// Runs it with those flags.
    pub run: fn(&Path, bool) -> StudyRun,
}

impl StudyRun {
    /// A study this machine cannot run, and why: not a failure.
    pub fn skipped(why: String) -> StudyRun {
        StudyRun { outcome: Ok(()), skipped: vec![why], ..StudyRun::failed(Failure::Interrupted) }
    }

    /// A study that could not start.
    pub fn failed(failure: Failure) -> StudyRun {
        StudyRun {
            outcome: Err(failure),
            answer: Vec::new(),
            chart: None,
            ran: Vec::new(),
            skipped: Vec::new(),
            versions: BTreeMap::new(),
        }
    }
}

/// What one study did, for the index page.
pub struct StudyRun {
    /// How it ended.
    pub outcome: Result<(), Failure>,
    /// Its answer in one or two sentences, each with its figure and spread,
    /// generated from what ran (the index page leads with them).
    pub answer: Vec<String>,
    /// The chart a reader would want first.
    pub chart: Option<crate::page::Chart>,
    /// What ran, a line each.
    pub ran: Vec<String>,
    /// What was skipped or run otherwise than asked, and why, a line each.
    pub skipped: Vec<String>,
    /// The versions of what ran.
    pub versions: BTreeMap<String, String>,
}
