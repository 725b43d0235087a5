//! The endpoints, one per execution model, with the seed study's names
//! (study 1 numbers them: its Test IDs). The single list here is what the router, `/metrics` and the
//! experiment runner all read, so a new model is added in one place.

/// One route of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/test`: no I/O at all; the ceiling of the HTTP stack.
    Test,
    /// `/getData`: the blocking read on the HTTP runtime's worker thread.
    GetData,
    /// `/getDataAsync`: the non-blocking read, awaited.
    GetDataAsync,
    /// `/getDataAsync2`: two non-blocking reads in sequence.
    GetDataAsync2,
    /// `/getDataAkka`: a router over 4 actors doing blocking reads; the handler blocks on the reply.
    GetDataAkka,
    /// `/getDataAkkaAsync`: one actor that pipes a non-blocking read back to the asker.
    GetDataAkkaAsync,
    /// `/getDataAkkaAsync2`: two such asks in sequence.
    GetDataAkkaAsync2,
    /// `/getDataSpawnBlocking`: the blocking read moved to tokio's blocking pool.
    GetDataSpawnBlocking,
    /// `/delay`: waits `?ms=` (default 5000), then answers `{"success":true}`;
    /// study 2's slow endpoint, served by every server model.
    Delay,
    /// `/metrics`: the Prometheus exposition.
    Metrics,
    /// Any other path (answered 404).
    Other,
}

impl Endpoint {
    /// The endpoints that read a node, in Test ID order.
    pub const DATA: [Endpoint; 7] = [
        Endpoint::GetData,
        Endpoint::GetDataAsync,
        Endpoint::GetDataAsync2,
        Endpoint::GetDataAkka,
        Endpoint::GetDataAkkaAsync,
        Endpoint::GetDataAkkaAsync2,
        Endpoint::GetDataSpawnBlocking,
    ];

    /// Every endpoint: `/test`, the data endpoints, `/delay`, then `/metrics` and the rest.
    pub const ALL: [Endpoint; 11] = extend(
        extend::<1, 7, 8>([Endpoint::Test], Endpoint::DATA),
        [Endpoint::Delay, Endpoint::Metrics, Endpoint::Other],
    );

    /// The URL path (for `Other`, a label only).
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Test => "/test",
            Endpoint::GetData => "/getData",
            Endpoint::GetDataAsync => "/getDataAsync",
            Endpoint::GetDataAsync2 => "/getDataAsync2",
            Endpoint::GetDataAkka => "/getDataAkka",
            Endpoint::GetDataAkkaAsync => "/getDataAkkaAsync",
            Endpoint::GetDataAkkaAsync2 => "/getDataAkkaAsync2",
            Endpoint::GetDataSpawnBlocking => "/getDataSpawnBlocking",
            Endpoint::Delay => "/delay",
            Endpoint::Metrics => "/metrics",
            Endpoint::Other => "other",
        }
    }

    /// The endpoint serving `path`, or `Other`.
    pub fn from_path(path: &str) -> Endpoint {
        Endpoint::ALL
            .into_iter()
            .find(|e| *e != Endpoint::Other && e.path() == path)
            .unwrap_or(Endpoint::Other)
    }

    /// One line on the execution model, for `--help`, logs and reports.
    pub fn model(self) -> &'static str {
        match self {
            Endpoint::Test => "no I/O",
            Endpoint::GetData => "blocking read on the HTTP worker thread",
            Endpoint::GetDataAsync => "non-blocking read, awaited",
            Endpoint::GetDataAsync2 => "two non-blocking reads in sequence",
            Endpoint::GetDataAkka => "router over 4 blocking actors; handler blocks on the reply",
            Endpoint::GetDataAkkaAsync => "one actor piping a non-blocking read back",
            Endpoint::GetDataAkkaAsync2 => "two asks to the piping actor in sequence",
            Endpoint::GetDataSpawnBlocking => "blocking read on tokio's blocking pool",
            Endpoint::Delay => "waits ?ms= (default 5 s), then answers; how it waits is the server model's",
            Endpoint::Metrics => "Prometheus metrics",
            Endpoint::Other => "unknown path",
        }
    }

    /// Position in [`Endpoint::ALL`], for per-endpoint arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// `head` followed by `tail`, in a constant.
const fn extend<const A: usize, const B: usize, const C: usize>(
    head: [Endpoint; A],
    tail: [Endpoint; B],
) -> [Endpoint; C] {
    assert!(A + B == C, "the lengths must add up");
    let mut out = [Endpoint::Other; C];
    let mut i = 0;
    while i < A {
        out[i] = head[i];
        i += 1;
    }
    while i < C {
        out[i] = tail[i - A];
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_and_indices_match_all() {
        for (i, e) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(e.index(), i);
            if e != Endpoint::Other {
                assert_eq!(Endpoint::from_path(e.path()), e);
            }
        }
        assert_eq!(Endpoint::from_path("/nope"), Endpoint::Other);
        assert_eq!(Endpoint::from_path("other"), Endpoint::Other);
    }
}
