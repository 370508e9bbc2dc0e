//! Text in and out, one home each: how numbers, bytes and percentages are
//! written ([`mod@format`], one rounding rule), how text is escaped for HTML,
//! SVG and XML ([`escape`]), and how sizes, seconds and rates written by
//! people are read ([`parse`]). Every layer and the CLI use these; nobody
//! keeps a copy.

pub mod escape;
pub mod format;
pub mod parse;
