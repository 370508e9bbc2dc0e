//! Statistics of repeated measurements. (Being written.)
