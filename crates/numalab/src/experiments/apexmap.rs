//! `numalab apexmap`: the Apex-MAP locality map and its simple model.
