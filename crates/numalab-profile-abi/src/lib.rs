//! The contract between `numalab` and its preload library
//! (`libnumalab_preload.so`, which `numalab profile` and `numalab run
//! --plan` load into a program): one owner for everything both sides must
//! read the same way.
//!
//! - [`record`]: the fixed-size binary records the library writes, their
//!   kinds and flag bits, with encode and decode;
//! - [`events`]: typed views of the records whose fields mean something
//!   else for each kind (a Start's rate in `node`, a small allocation's
//!   sampling mean in `cpu`, a frame's depth in `size`), so that neither
//!   side reads a field by its storage name;
//! - [`config`]: the environment that configures the library, one type
//!   written with [`config::LibraryConfig::to_env`] by numalab and read
//!   with [`config::LibraryConfig::from_env`] by the library;
//! - [`perf`]: the `perf_event_open` attribute structure and the layout
//!   of its samples, which both sides open events and decode samples with
//!   (each makes the system call in its own `sys` module).
//!
//! The crate has no dependencies and no unsafe code: the library links it
//! into every program it is loaded into.

#![forbid(unsafe_code)]

pub mod config;
pub mod events;
pub mod perf;
pub mod record;
