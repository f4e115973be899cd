//! Helpers shared by integration tests (`mod support;`).
pub mod scripted_http;
