//! `numalab sweep`: the placement truth table of the classic ccNUMA studies.
