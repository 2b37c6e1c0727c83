//! Scenarios with a scheduler hierarchy through `analyze`.
