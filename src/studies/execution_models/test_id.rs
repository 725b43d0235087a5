//! The seed study's Test IDs: its numbering of its APIs (1–8, no 6, as the
//! seed has it), 9 and up for blocklab's own endpoints, and the endpoints
//! study 1 measures. Study 1's knowledge: the server knows its endpoints by
//! path only.

use crate::server::Endpoint;

/// A Test ID. In the outputs, a plain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TestId(pub u32);

impl std::fmt::Display for TestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The endpoints study 1 measures, in Test ID order: `/test`, then those that read a node.
pub const MEASURED: [Endpoint; 8] = {
    let mut measured = [Endpoint::Test; 8];
    let mut i = 0;
    while i < Endpoint::DATA.len() {
        measured[i + 1] = Endpoint::DATA[i];
        i += 1;
    }
    measured
};

/// An endpoint's Test ID.
pub trait HasTestId {
    /// Its Test ID, if study 1 measures it.
    fn test_id(self) -> Option<TestId>;
}

impl HasTestId for Endpoint {
    fn test_id(self) -> Option<TestId> {
        let id = match self {
            Endpoint::Test => 1,
            Endpoint::GetData => 2,
            Endpoint::GetDataAsync => 3,
            Endpoint::GetDataAsync2 => 4,
            Endpoint::GetDataAkka => 5,
            Endpoint::GetDataAkkaAsync => 7,
            Endpoint::GetDataAkkaAsync2 => 8,
            Endpoint::GetDataSpawnBlocking => 9,
            Endpoint::Delay | Endpoint::Metrics | Endpoint::Other => return None,
        };
        Some(TestId(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_endpoints_are_the_data_endpoints_after_test_in_test_id_order() {
        assert_eq!(MEASURED[1..], Endpoint::DATA);
        let ids: Vec<u32> = MEASURED.iter().map(|e| e.test_id().unwrap().0).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5, 7, 8, 9]);
        assert_eq!(Endpoint::Delay.test_id(), None);
    }
}
