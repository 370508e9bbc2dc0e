//! What a result depends on. (Being written.)
