//! The engine's integration tests, in `tests/`: `library` (one binary for
//! the engine's public API: fixtures, parsers, properties, measurements on
//! this machine) and, apart because they change process-wide state,
//! `cancel`, `launch` and `launch_signals`.
//!
//! They are a package of their own for one reason: the engine package
//! builds at opt-level 3 (the workspace's Cargo.toml), and a profile
//! override covers every target of a package, integration tests included.
//! Here the test code builds at dev's opt-level 0 and calls the optimized
//! engine, which is what the measurements need. This library is empty.
