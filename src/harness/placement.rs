//! Where the server and the load generator run: disjoint CPU sets when the
//! process may use two cores or more, one shared set (with a warning) when not.

use std::fmt;

/// The CPUs each side is pinned to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placement {
    /// CPUs the server may run on.
    pub server_cpus: Vec<usize>,
    /// CPUs the load generator may run on.
    pub load_cpus: Vec<usize>,
    /// True when both had to share the same CPUs.
    pub shared: bool,
    /// Whether pinning is applied (`taskset` found).
    pub pinned: bool,
}

impl Placement {
    /// Splits `allowed` in two halves: the first for the server, the rest for the load.
    pub fn split(allowed: &[usize], pinned: bool) -> Placement {
        if allowed.len() < 2 {
            return Placement {
                server_cpus: allowed.to_vec(),
                load_cpus: allowed.to_vec(),
                shared: true,
                pinned,
            };
        }
        let half = allowed.len() / 2;
        Placement {
            server_cpus: allowed[..half].to_vec(),
            load_cpus: allowed[half..].to_vec(),
            shared: false,
            pinned,
        }
    }

    /// The placement for this process: its allowed CPUs, pinned with taskset if present.
    pub fn detect() -> Placement {
        let allowed = allowed_cpus();
        let pinned = which("taskset");
        Placement::split(&allowed, pinned)
    }

    /// The warning to print, if any.
    pub fn warning(&self) -> Option<String> {
        if !self.pinned {
            Some(
                "taskset not found: server and load generator are not pinned and compete for the CPUs"
                    .to_string(),
            )
        } else if self.shared {
            Some(format!(
                "only one CPU ({}) is available: server and load generator share it, so every figure includes \
                 the load generator's own cost",
                list(&self.server_cpus)
            ))
        } else {
            None
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.pinned {
            return write!(f, "not pinned (taskset missing)");
        }
        write!(
            f,
            "server on CPU {}, load generator on CPU {}",
            list(&self.server_cpus),
            list(&self.load_cpus)
        )?;
        if self.shared {
            write!(f, " (shared)")?;
        }
        Ok(())
    }
}

/// `0,2,3` style list, as taskset takes it.
pub fn list(cpus: &[usize]) -> String {
    cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// The CPUs this process may run on, from `/proc/self/status` (honours taskset and cpusets).
pub fn allowed_cpus() -> Vec<usize> {
    crate::proc::allowed_cpus()
        .unwrap_or_else(|| (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect())
}

/// Parses `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<usize>().ok()),
        }
    }
    cpus
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-1"), vec![0, 1]);
        assert_eq!(parse_cpu_list("0,2-4,7"), vec![0, 2, 3, 4, 7]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }

    #[test]
    fn placement_is_disjoint_when_it_can_be() {
        let p = Placement::split(&[0, 1], true);
        assert_eq!((p.server_cpus, p.load_cpus, p.shared), (vec![0], vec![1], false));
        let p = Placement::split(&[3], true);
        assert!(p.shared && p.warning().is_some());
        let p = Placement::split(&[0, 1, 2, 3], true);
        assert_eq!((p.server_cpus, p.load_cpus), (vec![0, 1], vec![2, 3]));
    }
}
