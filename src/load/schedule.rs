//! The open loop's schedule: when request *i* of the run is due. A constant
//! `--rate R` puts it at `i / R`; stages (`--rate 100:10s,2000:30s,0:10s`,
//! k6's ramping arrival rate) ramp the rate linearly from one point to the
//! next, and request *i* is due when the requests due so far — the area
//! under the rate — reach *i*. Latency corrected for coordinated omission
//! is measured from these due times, so it stays right across a ramp.

use std::time::Duration;

/// One stage: the rate ramps linearly to `target` over `duration`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    /// Requests per second at the end of the stage.
    pub target: f64,
    /// How long the stage lasts.
    pub duration: Duration,
}

/// `--rate`: a constant rate, or a start rate and stages.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSchedule {
    /// The rate at the start (requests/s).
    pub start: f64,
    /// The stages; none for a constant rate.
    pub stages: Vec<Stage>,
}

impl RateSchedule {
    /// `R` (constant), or `[START,]RATE:DUR,RATE:DUR,...` — each stage ramps
    /// linearly from the previous rate (START, or 0) to RATE over DUR.
    pub fn parse(text: &str) -> Result<RateSchedule, String> {
        let rate = |s: &str| match s.trim().parse::<f64>() {
            Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
            _ => Err(format!("'{s}' is not a number of 0 or more")),
        };
        let items: Vec<&str> = text.split(',').map(str::trim).collect();
        if items.len() == 1 && !items[0].contains(':') {
            let r = rate(items[0])?;
            if r <= 0.0 {
                return Err("must be a positive number of requests per second".to_string());
            }
            return Ok(RateSchedule { start: r, stages: Vec::new() });
        }
        let (start, rest) = match items.first() {
            Some(first) if !first.contains(':') => (rate(first)?, &items[1..]),
            _ => (0.0, &items[..]),
        };
        let mut stages = Vec::new();
        for item in rest {
            let (r, d) = item
                .split_once(':')
                .ok_or_else(|| format!("stage '{item}' is not RATE:DURATION (e.g. 2000:30s)"))?;
            let duration = humantime::parse_duration(d.trim())
                .map_err(|e| format!("stage '{item}': '{d}' is not a duration: {e}"))?;
            if duration.is_zero() {
                return Err(format!("stage '{item}' lasts no time"));
            }
            stages.push(Stage { target: rate(r)?, duration });
        }
        if stages.is_empty() {
            return Err("no stage after the start rate (e.g. 100,2000:30s)".to_string());
        }
        if start == 0.0 && stages.iter().all(|s| s.target == 0.0) {
            return Err("every stage has a rate of 0: nothing would be sent".to_string());
        }
        Ok(RateSchedule { start, stages })
    }

    /// A constant rate.
    pub fn constant(rate: f64) -> RateSchedule {
        RateSchedule { start: rate, stages: Vec::new() }
    }

    /// How long the stages last (`None` for a constant rate).
    pub fn total(&self) -> Option<Duration> {
        (!self.stages.is_empty()).then(|| self.stages.iter().map(|s| s.duration).sum())
    }

    /// Requests due in the first `t` of the run (the area under the rate).
    pub fn due_within(&self, t: Duration) -> f64 {
        let mut t = t.as_secs_f64();
        if self.stages.is_empty() {
            return self.start * t;
        }
        let (mut from, mut n) = (self.start, 0.0);
        for stage in &self.stages {
            let d = stage.duration.as_secs_f64();
            let span = t.min(d);
            n += from * span + (stage.target - from) * span * span / (2.0 * d);
            t -= span;
            if t <= 0.0 {
                break;
            }
            from = stage.target;
        }
        n
    }

    /// The mean rate over the stages (the rate, for a constant one).
    pub fn mean(&self) -> f64 {
        match self.total() {
            None => self.start,
            Some(total) => self.due_within(total) / total.as_secs_f64(),
        }
    }

    /// When request `slot` (0, 1, 2, …) is due after the start; `None` when
    /// the stages end before it.
    pub fn due(&self, slot: u64) -> Option<Duration> {
        let mut n = slot as f64;
        if self.stages.is_empty() {
            return Some(Duration::from_secs_f64(n / self.start));
        }
        let (mut from, mut at) = (self.start, 0.0);
        for stage in &self.stages {
            let d = stage.duration.as_secs_f64();
            let k = (stage.target - from) / (2.0 * d);
            let in_stage = from * d + k * d * d;
            if n < in_stage {
                // Solve from·t + k·t² = n for t in [0, d]; this form is stable when k is near 0.
                let denominator = from + (from * from + 4.0 * k * n).max(0.0).sqrt();
                let t = if denominator > 0.0 { 2.0 * n / denominator } else { 0.0 };
                return Some(Duration::from_secs_f64(at + t.clamp(0.0, d)));
            }
            n -= in_stage;
            at += d;
            from = stage.target;
        }
        None
    }
}

/// `--connections [START,]N:DUR,...`: the closed loop's connection count in
/// stages, ramping linearly from one point to the next as `--rate`'s stages
/// do. Connection *c* (0, 1, 2, …) is open while the level is above *c*.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionStages(RateSchedule);

impl ConnectionStages {
    /// Parses the stages (a single number is `-c`'s job).
    pub fn parse(text: &str) -> Result<ConnectionStages, String> {
        let shape = RateSchedule::parse(text)?;
        if shape.stages.is_empty() {
            return Err("give stages, N:DURATION,... (a fixed number of connections is -c N)".to_string());
        }
        Ok(ConnectionStages(shape))
    }

    /// How long the stages last.
    pub fn total(&self) -> Duration {
        self.0.total().expect("stages")
    }

    /// The most connections any point asks for.
    pub fn max(&self) -> usize {
        let top = self.0.stages.iter().map(|s| s.target).fold(self.0.start, f64::max);
        top.ceil() as usize
    }

    /// The level `t` after the start (connections, not rounded).
    pub fn level_at(&self, t: Duration) -> f64 {
        let (mut from, mut at, t) = (self.0.start, 0.0, t.as_secs_f64());
        for stage in &self.0.stages {
            let d = stage.duration.as_secs_f64();
            if t < at + d {
                return from + (stage.target - from) * (t - at) / d;
            }
            at += d;
            from = stage.target;
        }
        from
    }

    /// Whether connection `c` is open `t` after the start.
    pub fn is_open(&self, c: usize, t: Duration) -> bool {
        (c as f64) < self.level_at(t)
    }

    /// The first time at or after `t` when connection `c` is open; `None`
    /// when it never is again before the stages end.
    pub fn opens_at(&self, c: usize, t: Duration) -> Option<Duration> {
        if self.is_open(c, t) {
            return Some(t);
        }
        let (c, now) = (c as f64, t.as_secs_f64());
        let (mut from, mut at) = (self.0.start, 0.0);
        for stage in &self.0.stages {
            let d = stage.duration.as_secs_f64();
            let end = at + d;
            if end > now && stage.target > c {
                // The ramp crosses c within this stage (a hair after, so that it is above it).
                let cross = if from > c { at } else { at + (c - from) / (stage.target - from) * d };
                return Some(Duration::from_secs_f64(cross.max(now) + 1e-6));
            }
            at = end;
            from = stage.target;
        }
        None
    }

    /// The points (seconds since the start, connections), for reports.
    pub fn points(&self) -> Vec<(f64, f64)> {
        let mut at = 0.0;
        let mut points = vec![(0.0, self.0.start)];
        for stage in &self.0.stages {
            at += stage.duration.as_secs_f64();
            points.push((at, stage.target));
        }
        points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_open_and_close_with_their_stages() {
        // 0 → 4 over 2 s, 4 for 1 s, down to 0 over 2 s.
        let s = ConnectionStages::parse("4:2s,4:1s,0:2s").unwrap();
        assert_eq!((s.max(), s.total()), (4, Duration::from_secs(5)));
        assert!(!s.is_open(0, Duration::ZERO));
        assert!(s.is_open(0, Duration::from_millis(600)) && !s.is_open(1, Duration::from_millis(400)));
        assert!(s.is_open(3, Duration::from_millis(2500)));
        // Connection 2 opens when 2 t = 2 (t = 1 s) and closes when 4 - 2 (t - 3) = 2 (t = 4 s).
        let opens = s.opens_at(2, Duration::ZERO).unwrap().as_secs_f64();
        assert!((opens - 1.0).abs() < 1e-3, "{opens}");
        assert!(s.is_open(2, Duration::from_millis(3900)) && !s.is_open(2, Duration::from_millis(4100)));
        assert_eq!(s.opens_at(2, Duration::from_millis(4100)), None);
        assert!(ConnectionStages::parse("10").is_err());
    }

    fn secs(d: Option<Duration>) -> f64 {
        d.unwrap().as_secs_f64()
    }

    #[test]
    fn a_constant_rate_is_i_over_r() {
        let s = RateSchedule::parse("200").unwrap();
        assert_eq!((s.stages.len(), s.mean()), (0, 200.0));
        assert!((secs(s.due(50)) - 0.25).abs() < 1e-9);
        assert!(RateSchedule::parse("0").is_err());
    }

    #[test]
    fn a_ramp_puts_requests_where_the_area_under_the_rate_says() {
        // 0 → 100/s over 10 s: N(t) = 5 t², 500 requests; then 100/s for 5 s; then down to 0 over 10 s.
        let s = RateSchedule::parse("100:10s,100:5s,0:10s").unwrap();
        assert_eq!(s.total(), Some(Duration::from_secs(25)));
        assert!((s.due_within(Duration::from_secs(10)) - 500.0).abs() < 1e-6);
        assert!((s.due_within(Duration::from_secs(25)) - 1500.0).abs() < 1e-6);
        assert!((s.mean() - 60.0).abs() < 1e-9);
        assert_eq!(secs(s.due(0)), 0.0);
        assert!((secs(s.due(125)) - 5.0).abs() < 1e-9, "5 t² = 125 at t = 5");
        assert!((secs(s.due(600)) - 11.0).abs() < 1e-9, "100 more at 100/s");
        // Ramp down: 1000 + 100 t - 5 t² = 1375 at t = 5.
        assert!((secs(s.due(1375)) - 20.0).abs() < 1e-6);
        assert_eq!(s.due(1500), None);
        // Due times grow with the slot, through every stage.
        let times: Vec<f64> = (0..1500).map(|i| secs(s.due(i))).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]));
        // A start rate: 100 → 300 over 2 s is 400 requests.
        let s = RateSchedule::parse("100,300:2s").unwrap();
        assert!((s.due_within(Duration::from_secs(2)) - 400.0).abs() < 1e-9);
        for bad in ["", "x", "100:", "100:0s", "100:soon", "-5:1s", "0:5s", "100,200"] {
            assert!(RateSchedule::parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
