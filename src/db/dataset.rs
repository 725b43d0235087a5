//! The Content dataset: what node `id` holds, in one place, so that the
//! embedded loader, the seeder of networked databases and the tests agree.

use super::backend::Content;

/// The record stored as node `id`, shaped like the seed study's node.
pub fn content_record(id: i64) -> Content {
    Content {
        id,
        name: format!("resource{id}"),
        code: format!("test.lp.content.{id}"),
        mime_type: "application/pdf".to_string(),
        content_type: "Resource".to_string(),
        body: "body string".to_string(),
    }
}
