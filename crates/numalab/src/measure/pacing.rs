//! Rate-paced background traffic: threads reading (or writing) their local
//! buffers at a set number of bytes per second, achieved rate measured.
