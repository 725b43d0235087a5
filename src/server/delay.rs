//! `/delay`, study 2's slow endpoint: what it waits and what it answers. How
//! it waits (a timer or a sleeping thread) is the server model's business.

use std::time::Duration;

/// The answer, the seed's POJO serialized: `{"success":true}`.
pub const BODY: &str = r#"{"success":true}"#;

/// The wait when `?ms=` is absent: the seed's 5 s.
pub const DEFAULT: Duration = Duration::from_secs(5);

/// The longest wait `?ms=` may ask for: 10 minutes.
pub const MAX_MS: u64 = 600_000;

/// The wait `query` asks for with `?ms=N`, or why it is not one.
pub fn requested(query: Option<&str>) -> Result<Duration, String> {
    let given =
        query.and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(key, _)| key == "ms").map(|(_, v)| v));
    let Some(raw) = given else {
        return Ok(DEFAULT);
    };
    match raw.trim().parse::<u64>() {
        Ok(ms) if ms <= MAX_MS => Ok(Duration::from_millis(ms)),
        _ => {
            let shown: String = raw.chars().take(40).collect();
            Err(format!("ms must be an integer from 0 to {MAX_MS}, got '{shown}'"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_valid_and_invalid_waits() {
        assert_eq!(requested(None), Ok(DEFAULT));
        assert_eq!(requested(Some("x=1")), Ok(DEFAULT));
        assert_eq!(requested(Some("ms=0")), Ok(Duration::ZERO));
        assert_eq!(requested(Some("a=b&ms=250")), Ok(Duration::from_millis(250)));
        assert_eq!(requested(Some("ms=600000")), Ok(Duration::from_secs(600)));
        for bad in ["ms=600001", "ms=-1", "ms=abc", "ms=", "ms=1.5", "ms=99999999999999999999999"] {
            let e = requested(Some(bad)).unwrap_err();
            assert!(e.starts_with("ms must be an integer from 0 to 600000"), "{bad}: {e}");
        }
    }
}
